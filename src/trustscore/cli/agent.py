"""``trustscore agent register``: sign and submit an agent card; ``agent show`` and ``agent list``: read them."""

from __future__ import annotations

import argparse
import secrets
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec

from trustscore.canonical import b64encode
from trustscore.cli import common
from trustscore.cli.table import cell, render
from trustscore.client import LogClient
from trustscore.errors import InvalidInput
from trustscore.kinds import cards
from trustscore.ledger import dsse, keys, statements


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser("agent", help="agent cards")
    asub = p.add_subparsers(dest="agent_command", required=True, metavar="SUBCOMMAND")
    r = asub.add_parser("register", help="sign an agent card with your key and submit it")
    r.add_argument("--key", type=Path, required=True, help="the agent's key file (trustscore keygen)")
    r.add_argument("--name", required=True)
    r.add_argument("--endpoint", help="declared endpoint URL the server may re-verify")
    r.add_argument("--model")
    r.add_argument("--model-version")
    r.add_argument("--capability", action="append", default=[], help="a declared capability (repeatable)")
    r.add_argument(
        "--controller-key", type=Path, help="key file of the operator controlling this agent (co-signs)"
    )
    r.add_argument(
        "--declarations",
        type=Path,
        help="JSON file {declarations: [CapabilityDeclaration], non_capabilities: [...]} (an agent-card/v2; "
        "docs/scope-honesty.md)",
    )
    r.add_argument("--server", required=True, help="trustscore server URL")
    common.add_json(r)
    r.set_defaults(func=run_register)
    s = asub.add_parser("show", help="an agent's current card and verification status")
    s.add_argument("agent", help="the agent's id (ts1_...)")
    s.add_argument("--server", required=True, help="trustscore server URL")
    common.add_json(s)
    s.set_defaults(func=run_show)
    ls = asub.add_parser("list", help="registered agents in id order, a page at a time")
    ls.add_argument("--server", required=True, help="trustscore server URL")
    ls.add_argument("--limit", type=common.bounded(1, 1000), default=100, help="agents per page, 1..1000")
    ls.add_argument("--after", help="list agents after this id (the previous page's last, printed as next)")
    common.add_json(ls)
    ls.set_defaults(func=run_list)


def card_envelope(
    key: keys.SigningKey,
    name: str,
    *,
    endpoint: str | None = None,
    model: str | None = None,
    model_version: str | None = None,
    capabilities: list[str] | None = None,
    controller: keys.SigningKey | None = None,
    declarations: list[cards.CapabilityDeclaration] | None = None,
    non_capabilities: list[str] | None = None,
) -> dsse.Envelope:
    """A signed agent card for ``key`` (checked locally with the same rules the server applies): an
    ``agent-card/v2`` when it declares capabilities or non-capabilities, else a v1 card."""
    card = cards.AgentCard(
        nonce=secrets.token_hex(16),
        issued_at=statements.format_time(datetime.now(UTC)),
        public_key=b64encode(key.public_key),
        name=name,
        endpoint=endpoint,
        model=model,
        model_version=model_version,
        capabilities=capabilities or [],
        controller_key=None if controller is None else b64encode(controller.public_key),
    )
    subject = cards.card_subject(key.public_key)
    if declarations is not None or non_capabilities is not None:
        v2 = cards.AgentCardV2(
            **msgspec.structs.asdict(card),
            declarations=declarations or [],
            non_capabilities=non_capabilities or [],
        )
        payload = statements.make_statement(cards.AGENT_CARD_V2, subject, v2)
    else:
        payload = statements.make_statement(cards.AGENT_CARD, subject, card)
    statements.parse_statement(payload)  # same validation as the server: fail here, not there
    return dsse.sign(payload, [key] if controller is None else [key, controller])


class _DeclarationsFile(msgspec.Struct, forbid_unknown_fields=True):
    declarations: list[cards.CapabilityDeclaration] = msgspec.field(default_factory=list)
    non_capabilities: list[str] = msgspec.field(default_factory=list)


def _declarations(path: Path) -> dict[str, Any]:
    """A declarations file as card_envelope keywords; a malformed file is a one-line error."""
    try:
        f = msgspec.json.decode(path.read_bytes(), type=_DeclarationsFile)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise InvalidInput(f"{path}: {exc}") from exc
    return {"declarations": f.declarations, "non_capabilities": f.non_capabilities}


def run_register(args: argparse.Namespace) -> int:
    key = keys.read_key_file(args.key)
    env = card_envelope(
        key,
        args.name,
        endpoint=args.endpoint,
        model=args.model,
        model_version=args.model_version,
        capabilities=args.capability,
        controller=keys.read_key_file(args.controller_key) if args.controller_key else None,
        **(_declarations(args.declarations) if args.declarations else {}),
    )
    with LogClient(args.server) as client:
        [entry] = client.submit(env)
    common.emit(
        args,
        {"agent": key.id, "index": entry["index"]},
        [f"agent: {key.id}", f"index: {entry['index']}"],
    )
    return 0


def agent_lines(a: dict[str, Any]) -> list[str]:
    """An agent (GET /v1/agents/{id}) as text lines."""
    v = a["verification"]
    status = "verified" if v["verified"] else f"not verified ({v.get('lapsed') or 'never run'})"
    lines = [
        f"agent: {a['id']} ({a['kind']})",
        f"name: {cell(a['name'])}",  # text from the server: no control characters reach the terminal
        f"endpoint: {cell(a['endpoint'])}",
        f"controller: {cell(a['controller'])}",
        f"card: entry {a['card_index']}",
        f"re-verification: {status}, {v.get('runs', len(v['history']))} run(s)",  # history: the newest only
    ]
    if a.get("name_confusable_with"):
        lines.append(f"warning: the name looks like that of {', '.join(a['name_confusable_with'])}")
    return lines


def run_show(args: argparse.Namespace) -> int:
    agent = common.agent_id(args.agent)
    with LogClient(args.server) as client:
        data = client.get_json(f"/v1/agents/{agent}")
    common.emit(args, data, agent_lines(data))
    return 0


def run_list(args: argparse.Namespace) -> int:
    after = None if args.after is None else common.agent_id(args.after)
    with LogClient(args.server) as client:
        page = client.get_json("/v1/agents", {"limit": args.limit, "after": after})
    rows = [[a["id"], a["kind"], a["name"]] for a in page["agents"]]
    lines = render(["AGENT", "KIND", "NAME"], rows) if rows else ["(no agents)"]
    if page.get("next"):
        lines.append(f"next: --after {page['next']}")
    common.emit(args, page, lines)
    return 0
