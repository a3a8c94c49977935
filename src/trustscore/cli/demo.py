"""``trustscore demo``: the whole product in one command, on a throwaway embedded database.

The command is the frame: it starts ``trustscore serve`` on the embedded PostgreSQL and one example agent
HTTP server per persona (:mod:`trustscore.devserver`), tells the story (:mod:`trustscore.cli.demo_story`)
against them, prints the commands that check it all again, and always stops the servers. See docs/demo.md.
"""

from __future__ import annotations

import argparse
import contextlib
import shlex
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from trustscore.cli.demo_story import (
    ENDPOINT_PERSONA,
    MODEL,
    PERSONAS,
    REVERIFY_DEADLINE,
    SERVER_LOG,
    WEIGHTS,
    Demo,
    DemoClient,
    Server,
    Shown,
    section,
)
from trustscore.devserver import AgentProcess, ServeProcess, check_port_free, free_port

# The demo server's settings (beside the caller's environment).
SERVER_ENV = {
    # No rating snapshots during the demo: snapshots taken while the agents' reports are still arriving
    # would rate their rising totals as drift (reliability's consistency term), and where they land
    # depends on the machine's speed, so the ranking would too.
    "TRUSTSCORE_SNAPSHOT_INTERVAL": "3600",
    "TRUSTSCORE_INTEGRATE_INTERVAL": "0.05",
    "TRUSTSCORE_OUTBOUND_ALLOW_LOOPBACK": "true",  # the example agents listen on 127.0.0.1
    "TRUSTSCORE_REVERIFY_DEADLINE": str(REVERIFY_DEADLINE),
    "TRUSTSCORE_REVERIFY_INTERVAL": "0",  # one run after each report, no schedule
}


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "demo", help="run the whole product once on a throwaway server and show ratings with their proofs"
    )
    p.add_argument(
        "--data-dir",
        type=Path,
        help="data directory to use and keep (default: a fresh temporary directory, removed at the end)",
    )
    p.add_argument("--port", type=int, help="port for the demo server (default: a free port)")
    p.add_argument("--keep", action="store_true", help="keep the temporary data directory")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    temporary = args.data_dir is None
    data_dir = Path(tempfile.mkdtemp(prefix="trustscore-demo-")) if temporary else args.data_dir
    try:
        kept = data_dir if not temporary or args.keep else None
        with (
            serving(data_dir, args.port or free_port()) as server,
            agent_servers(data_dir) as endpoints,
            contextlib.closing(DemoClient(server.url)) as client,
        ):
            shown = Demo(client, server, endpoints, data_dir, kept is not None).run()
            print_commands(server, shown, kept)
    finally:
        if temporary and not args.keep:
            shutil.rmtree(data_dir, ignore_errors=True)
        elif temporary:
            print(f"\ndata kept in {data_dir}")
    return 0


@contextlib.contextmanager
def serving(data_dir: Path, port: int) -> Iterator[Server]:
    """``trustscore serve`` on the embedded PostgreSQL in ``data_dir``, stopped (with it) on exit."""
    check_port_free(port)
    data_dir.mkdir(parents=True, exist_ok=True)
    print(f"starting trustscore serve on http://127.0.0.1:{port} (embedded PostgreSQL in {data_dir / 'pg'})")
    process = ServeProcess(data_dir, port=port, env=SERVER_ENV, log_path=data_dir / SERVER_LOG)
    with process:
        yield Server(process.url, port, process.verifier_key())


@contextlib.contextmanager
def agent_servers(data_dir: Path) -> Iterator[dict[str, AgentProcess]]:
    """One example agent server per persona, serving the persona its card's endpoint answers as."""
    with contextlib.ExitStack() as stack:
        yield {
            persona: stack.enter_context(
                AgentProcess(ENDPOINT_PERSONA[persona], log_path=data_dir / f"demo-agent-{persona}.log")
            )
            for persona in PERSONAS
        }


def print_commands(server: Server, shown: Shown, kept: Path | None) -> None:
    """How a reader checks all this again with the ordinary commands, trusting only the verifier key."""
    section("check it yourself")
    vkey = shlex.quote(server.verifier_key)
    url = server.url
    indexes = " ".join(f"--index {i}" for i in shown.verified_indexes)
    if kept is None:
        print("  the demo server stops now; rerun with --keep (or --data-dir DIR) to keep its log, then:")
    else:
        print("  the demo server stops now; start it again on the kept data, then:")
    print(f"  trustscore serve --data-dir {shlex.quote(str(kept or 'DIR'))} --port {server.port} &")
    print(f"  trustscore log verify --server {url} --verifier-key {vkey} {indexes}")
    print(f"  trustscore log fsck --server {url} --verifier-key {vkey}")
    print(
        f"  trustscore evidence export --server {url} --verifier-key {vkey} --size {shown.log_size} "
        f"--model {MODEL} --evidence-out evidence.jsonl --snapshots-out snapshots.jsonl"
    )
    weights = shlex.quote(str(WEIGHTS / f"{MODEL}.toml"))
    print(
        f"  trustscore score --weights {weights} --evidence evidence.jsonl --snapshots snapshots.jsonl "
        f"--at {shown.computed_at}"
    )
