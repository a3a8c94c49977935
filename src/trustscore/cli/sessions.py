"""``trustscore sessions scan|list|matrix|submit``: work records from coding-agent transcripts on disk.

``scan`` parses transcripts with the harness adapters (``ladder/sessions.py``) into a local index file;
``list`` shows each session's rung under the current rule; ``matrix`` shows which adapters produce outcome
evidence at all; ``submit`` signs each session as a self-attested work record and posts it.
"""

from __future__ import annotations

import argparse
import os
from collections import Counter
from pathlib import Path
from typing import Any

import msgspec

from trustscore.cli import common
from trustscore.cli.table import Column, render
from trustscore.client import LogClient
from trustscore.errors import InvalidInput
from trustscore.kinds.work_records import make_work_record
from trustscore.ladder.rule import CURRENT_RULE, RUNG_NAMES, VERIFIED_RUNG, check_rule
from trustscore.ladder.sessions import ADAPTERS, MAX_TRANSCRIPT_BYTES, Session
from trustscore.ledger import dsse, keys

DEFAULT_INDEX = Path(os.environ.get("TRUSTSCORE_SESSIONS_INDEX", ".trustscore/sessions.jsonl"))
MAX_FILES = 100_000
_decoder = msgspec.json.Decoder(Session)


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser("sessions", help="work records from agent transcripts")
    ssub = p.add_subparsers(dest="sessions_command", required=True, metavar="SUBCOMMAND")
    s = ssub.add_parser("scan", help="parse transcripts under PATH into the local index")
    s.add_argument("path", type=Path, help="a transcript file or a directory searched recursively")
    s.add_argument("--adapter", choices=sorted(ADAPTERS), default="claude_code")
    for q in (s, ssub.add_parser("list", help="the indexed sessions and their rungs"),
              ssub.add_parser("matrix", help="which adapters produce outcome evidence at all"),
              ssub.add_parser("submit", help="sign each session as a self-attested work record and post it")):  # fmt: skip
        q.add_argument("--index", type=Path, default=DEFAULT_INDEX, help="the local index file")
        q.add_argument("--rule", default=CURRENT_RULE, help="the rung rule to show")
        common.add_json(q)
    handlers = {"scan": run_scan, "list": run_list, "matrix": run_matrix, "submit": run_submit}
    for name, parser in ssub.choices.items():
        parser.set_defaults(func=handlers[name])
        if name == "list":
            parser.add_argument("--limit", type=int, default=20)
        if name == "submit":
            parser.add_argument("--key", type=Path, required=True, help="the agent's key file")
            parser.add_argument("--server", default=os.environ.get("TRUSTSCORE_SERVER"), required=False)


def _files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise InvalidInput(f"no such file or directory: {path}")
    found = sorted(p for p in path.rglob("*.jsonl") if p.is_file())
    if len(found) > MAX_FILES:
        raise InvalidInput(f"more than {MAX_FILES} transcripts under {path}: scan a narrower directory")
    return found


def load_index(path: Path) -> list[Session]:
    data = common.read_bytes(path, "sessions index (run `trustscore sessions scan` first)")
    out = []
    for n, line in enumerate(data.splitlines(), 1):
        try:
            out.append(_decoder.decode(line))
        except msgspec.DecodeError as exc:
            raise InvalidInput(f"sessions index line {n}: {exc}") from exc
    return out


def run_scan(args: argparse.Namespace) -> int:
    check_rule(args.rule)
    adapter = ADAPTERS[args.adapter]
    sessions: list[Session] = []
    too_big = 0
    for f in _files(args.path):
        if not adapter.matches(f.name):
            continue
        if f.stat().st_size > MAX_TRANSCRIPT_BYTES:
            too_big += 1
            continue
        sessions += adapter.parse(str(f), common.read_bytes(f, "transcript"))
    args.index.parent.mkdir(parents=True, exist_ok=True)
    common.write_bytes(args.index, b"".join(msgspec.json.encode(s) + b"\n" for s in sessions), "index")
    rungs = Counter(RUNG_NAMES[s.rung(args.rule).rung] for s in sessions)
    skipped = sum(s.skipped_lines for s in sessions)
    common.emit(
        args,
        {"sessions": len(sessions), "rungs": dict(rungs), "skipped_lines": skipped, "too_big": too_big},
        [
            f"{len(sessions)} sessions indexed in {args.index} ({args.rule})",
            *render(["rung", Column("sessions", right=True)], [[n, rungs.get(n, 0)] for n in RUNG_NAMES]),
            f"lines skipped (not JSON objects): {skipped}; transcripts over the size limit: {too_big}",
        ],
    )
    return 0


def run_list(args: argparse.Namespace) -> int:
    check_rule(args.rule)
    sessions = load_index(args.index)[-args.limit :] if args.limit > 0 else []
    rows: list[dict[str, Any]] = []
    lines: list[list[object]] = []
    for s in sessions:
        r = s.rung(args.rule)
        rows.append(
            {
                "session": s.session_id,
                "adapter": s.adapter,
                "model": s.model,
                "rung": r.rung,
                "rung_name": r.name,
                "summary": r.summary,
                "finished_at": s.finished_at,
            }
        )
        lines.append([s.finished_at[:19], s.session_id, r.rung, r.name, r.summary])
    table = render(
        ["finished", Column("session", limit=36), Column("rung", right=True), "name", "summary"], lines
    )
    common.emit(args, {"rule": args.rule, "sessions": rows}, table)
    return 0


def run_matrix(args: argparse.Namespace) -> int:
    check_rule(args.rule)
    sessions = load_index(args.index)
    out = []
    for name in sorted(ADAPTERS):
        mine = [s.rung(args.rule) for s in sessions if s.adapter == name]
        detected = sum(r.outcome_detected for r in mine)
        verified = sum(r.rung >= VERIFIED_RUNG for r in mine)
        out.append({"adapter": name, "n": len(mine), "outcome_detected": detected, "verified": verified})
    common.emit(
        args,
        {"rule": args.rule, "adapters": out},
        render(
            [
                "adapter",
                Column("n", right=True),
                Column("outcome evidence", right=True),
                Column("verified", right=True),
            ],
            [[a["adapter"], a["n"], a["outcome_detected"], a["verified"]] for a in out],
        ),
    )
    return 0


def run_submit(args: argparse.Namespace) -> int:
    if not args.server:
        raise InvalidInput("--server (or TRUSTSCORE_SERVER) is required")
    key = keys.read_key_file(args.key)
    sessions = load_index(args.index)
    indexes = []
    with LogClient(args.server) as client:
        for s in sessions:
            payload = make_work_record(
                reporter=key.id, agent=key.id, task_ref=s.task_ref, claimed_outcome=s.claimed_outcome,
                finished_at=s.finished_at, model=s.model, adapter=s.adapter, artifacts=s.artifacts,
                runs=s.runs, commits=s.commits,
            )  # fmt: skip
            indexes.append(client.submit_work_record(dsse.sign(payload, [key]))["index"])
    common.emit(
        args, {"submitted": len(indexes), "indexes": indexes}, [f"submitted {len(indexes)} work records"]
    )
    return 0
