"""``trustscore scope show AGENT``: an agent's scope-honesty score from a server, or recomputed offline
from an exported log (``--from-log``) with the same pure code the server runs (docs/scope-honesty.md)."""

from __future__ import annotations

import argparse
import datetime as dt
from typing import Any
from urllib.parse import quote

import msgspec

from trustscore.cli import common
from trustscore.client import LogClient
from trustscore.kinds.parties import check_key_id
from trustscore.scope.report import from_leaves


class ScopeClient(LogClient):
    """The scope-honesty routes of a trustscore server."""

    def __enter__(self) -> ScopeClient:
        return self

    def scope_honesty(self, agent: str) -> dict[str, Any]:
        data: dict[str, Any] = self._json("GET", f"/v1/agents/{quote(agent, safe='')}/scope-honesty")
        return data

    def capability(self, agent: str, capability: str) -> dict[str, Any]:
        path = f"/v1/agents/{quote(agent, safe='')}/scope-honesty/capabilities/{quote(capability, safe='')}"
        data: dict[str, Any] = self._json("GET", path)
        return data


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser("scope", help="scope honesty (declared vs measured)")
    ssub = p.add_subparsers(dest="scope_command", required=True, metavar="SUBCOMMAND")
    s = ssub.add_parser("show", help="an agent's SHS, components with n, tier, status and runs")
    s.add_argument("agent", help="the agent's key id (ts1_...)")
    s.add_argument("--server", required=True, help="trustscore server URL")
    s.add_argument("--capability", help="show one declared capability's history instead")
    s.add_argument(
        "--from-log",
        action="store_true",
        help="recompute offline from every log entry fetched from the server, instead of asking its API",
    )
    common.add_json(s)
    s.set_defaults(func=run_show)


def _component(name: str, c: dict[str, Any]) -> str:
    value = "null" if c["value"] is None else f"{c['value']:g}"
    return f"{name}: {value} (n={c['n']})" + (f" - {c['reason']}" if c.get("reason") else "")


def run_show(args: argparse.Namespace) -> int:
    check_key_id(args.agent, what="agent")
    with ScopeClient(args.server) as client:
        if args.capability:
            data = client.capability(args.agent, args.capability)
            lines = [f"capability {data['id']} of {data['agent']} (declared now: {data['declared_now']})"]
            lines += [
                f"  run {r['close_index']} at {r['at']}: {r['cases_passed']}/{r['cases_run']} "
                f"{'pass' if r['passes'] else 'FAIL'}"
                for r in data["runs"]
            ]
            common.emit(args, data, lines)
            return 0
        if args.from_log:
            size = int(client.checkpoint().splitlines()[1])
            leaves = [e for page in client.entry_pages(0, size) for e in page]
            data = msgspec.to_builtins(from_leaves(args.agent, leaves, dt.datetime.now(dt.UTC)))
        else:
            data = client.scope_honesty(args.agent)
    shs = "null" if data["shs"] is None else f"{data['shs']:g}"
    lines = [
        f"agent: {data['agent']}",
        f"SHS: {shs}" + (f" ({data['tier']})" if data["tier"] else f" - {data['shs_reason']}"),
        _component("DA", data["da"]),
        _component("FT", data["ft"]),
        _component("BA", data["ba"]),
        _component("TC", data["tc"]) + f"; worst week-over-week: {data['tc_worst_change']}",
        _component("RTS", data["rts"]),
        f"status: {data['status']}" + (f" ({'; '.join(data['status_reasons'])})" if data["status_reasons"] else "")
        + (" - human review required" if data["human_review_required"] else ""),
        "pact validity (SHS >= 80, not under review, suspended or cancelled): "
        + ("not reported by this server" if "pact_valid" not in data
           else {True: "met", False: "not met", None: "unknown (no weekly SHS)"}[data["pact_valid"]]),
        f"trend: {data['trend']}",
        *(f"capability {c['id']}: {c['cases_passed']}/{c['cases_run']} {'pass' if c['passes'] else 'FAIL'}, "
          f"last validated {c['last_validated']} (entry {c['last_validated_index']})" for c in data["capabilities"]),
        f"runs (sitting-close indexes): {', '.join(str(r['close_index']) for r in data['runs']) or 'none'}",
    ]  # fmt: skip
    if data["evaluation_due"]:
        lines.append("evaluation due: the declarations or model version changed since the last run")
    common.emit(args, data, lines)
    return 0
