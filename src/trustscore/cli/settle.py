"""``trustscore settle``: a counterparty reports how an agent performed in a deal (a signed settlement/v1).

The reporter signs with its own key (a registered agent or party) and the statement is about the other
side: a buyer reports the seller's ``--delivery``, a seller the buyer's ``--payment``; either may add
``--confirmed``. The statement is checked locally with the rules the server applies, then POSTed to
``/v1/settlements`` (docs/evidence-mapping.md).
"""

from __future__ import annotations

import argparse
import secrets
from pathlib import Path
from typing import Any

from trustscore.cli import common
from trustscore.client import LogClient
from trustscore.errors import InvalidInput
from trustscore.kinds.parties import now
from trustscore.kinds.settlements import make_settlement
from trustscore.ledger import dsse, keys


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "settle", help="report a deal's outcome about an agent (signed)"
    )
    p.add_argument("agent", help="the id of the agent the report is about (the other side of the deal)")
    p.add_argument("--key", type=Path, required=True, help="your (the reporter's) key file")
    p.add_argument("--role", choices=("buyer", "seller"), required=True, help="your side of the deal")
    p.add_argument("--delivery", choices=("pass", "late", "fail"), help="the seller's delivery (buyers only)")
    p.add_argument("--payment", choices=("pass", "fail"), help="the buyer's payment (sellers only)")
    p.add_argument("--confirmed", action="store_true", help="the trade closed economically")
    p.add_argument("--deal-id", help="your reference of the deal (default: a fresh random one)")
    p.add_argument("--server", required=True, help="trustscore server URL")
    common.add_json(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    about = common.agent_id(args.agent)
    key = keys.read_key_file(args.key)
    seller, buyer = (about, key.id) if args.role == "buyer" else (key.id, about)
    if args.deal_id is not None and not args.deal_id.strip():
        raise InvalidInput(
            "--deal-id is empty: give your reference of the deal, or leave it out for a fresh one"
        )
    deal = args.deal_id or f"deal-{secrets.token_hex(8)}"
    statement = make_settlement(  # checked here with the server's rules: a mistake fails before sending
        deal_id=deal,
        seller=seller,
        buyer=buyer,
        reporter_role=args.role,
        settled_at=now(),
        delivery=args.delivery,
        payment=args.payment,
        confirmed=args.confirmed,
    )
    with LogClient(args.server) as client:
        out = client.post_json("/v1/settlements", dsse.sign(statement, [key]))
    common.emit(
        args,
        {"index": out["index"], "deal_id": deal, "about": about, "reporter": key.id},
        [f"settlement of {deal} about {about} by {key.id}: entry {out['index']}"],
    )
    return 0
