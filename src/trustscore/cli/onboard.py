"""``trustscore onboard``: from nothing to a rating in one command.

Makes the key file when ``--key`` names none (never overwriting one), registers the agent's card, sits
every exam as a fresh server sitting (graded by the server), waits until the server's rating reflects
the last sitting, then prints the rating, the profile URL and the badge's Markdown.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

from trustscore.cli import common, numpy_cpu
from trustscore.cli.agent import card_envelope
from trustscore.cli.rating import rating_lines
from trustscore.client import LogClient
from trustscore.errors import StorageError
from trustscore.exams.forms import FORMS
from trustscore.ledger import keys
from trustscore.sdk.adapters import agent_from_spec
from trustscore.sdk.sitting import SittingClient, sit_on_server

RATING_WAIT_S = 60.0  # how long the server may take to project the last sitting into the rating


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "onboard", help="key, card, every exam as a fresh sitting, rating: one command"
    )
    p.add_argument("--agent", required=True, help="python:MOD:FN | cmd:COMMAND | http:URL | openai:MODEL@URL")
    p.add_argument("--name", required=True, help="the agent's display name")
    p.add_argument("--endpoint", help="declared endpoint URL the server may re-verify")
    p.add_argument("--key", type=Path, required=True, help="the agent's key file (created when missing)")
    p.add_argument("--server", required=True, help="trustscore server URL")
    p.add_argument(
        "--exam", action="append", choices=sorted(FORMS), help="sit only this exam (repeatable; default: all)"
    )
    p.add_argument(
        "--item-timeout", type=float, default=None, help="seconds per answer (default: the exam's)"
    )
    common.add_json(p)
    p.set_defaults(func=run)


def _say(args: argparse.Namespace, line: str) -> None:
    """Progress on stderr (stdout holds the result: text lines or one JSON object)."""
    if not args.json:
        print(line, file=sys.stderr)


def _key(path: Path) -> tuple[keys.SigningKey, bool]:
    """The key at ``path``, made there first when no file exists (True: made now)."""
    if path.exists():
        return keys.read_key_file(path), False
    key = keys.SigningKey.generate()
    keys.write_key_file(path, key)
    return key, True


def _wait_for_rating(client: LogClient, agent: str, after_index: int) -> dict[str, Any]:
    """The agent's rating once it reflects the log up to ``after_index`` (bounded wait)."""
    deadline = time.monotonic() + RATING_WAIT_S
    while True:
        rating: dict[str, Any] = client.get_json(f"/v1/agents/{agent}/rating")
        if rating["log_size"] > after_index:
            return rating
        if time.monotonic() > deadline:
            raise StorageError(f"the server has not rated entry {after_index} after {RATING_WAIT_S:.0f} s; "
                               f"try `trustscore rating show {agent}` later")  # fmt: skip
        time.sleep(0.2)


def run(args: argparse.Namespace) -> int:
    server = args.server.rstrip("/")
    key, made = _key(args.key)
    _say(args, f"key: {key.id} ({'new, written to' if made else 'read from'} {args.key})")
    exams = sorted(set(args.exam or FORMS))
    agent = agent_from_spec(args.agent, numpy_cpu.others_environ(os.environ))
    sat: list[dict[str, Any]] = []
    try:
        with LogClient(server) as client:
            [card] = client.submit(card_envelope(key, args.name, endpoint=args.endpoint))
            _say(args, f"card: entry {card['index']}")
            with SittingClient(server, timeout=120.0) as sittings:
                for exam in exams:
                    closed = sit_on_server(sittings, key, exam, agent, timeout_s=args.item_timeout).closed
                    sat.append(
                        {"exam": exam, "sitting": closed["sitting"], "close_index": closed["close_index"]}
                    )
                    _say(args, f"{exam}: sitting {closed['sitting']} graded (entry {closed['close_index']})")
            rating = _wait_for_rating(client, key.id, max(s["close_index"] for s in sat))
    finally:
        agent.close()
    profile = f"{server}/agents/{key.id}"
    badge = f"[![trustscore]({server}/v1/agents/{key.id}/badge.svg)]({profile})"
    common.emit(
        args,
        {"agent": key.id, "key_file": str(args.key), "key_created": made, "card_index": card["index"],
         "sittings": sat, "rating": rating, "profile": profile, "badge_markdown": badge},
        [*rating_lines(rating), f"profile: {profile}", f"badge: {badge}"],
    )  # fmt: skip
    return 0
