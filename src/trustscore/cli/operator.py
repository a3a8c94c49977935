"""``trustscore operator``: the operator's signed decisions, made with the log key.

``approve-marketplace KEY_ID`` lets a registered marketplace's events count as standing evidence;
``retire-marketplace KEY_ID`` ends that (docs/methodology.md, "Reporter standing"). Both sign a
``marketplace-approval/v1`` statement with the log key (read from ``--log-key``, default the server's
data directory) and post it to the server's log.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from trustscore.client import LogClient
from trustscore.errors import InvalidInput
from trustscore.kinds.approvals import Action, make_approval
from trustscore.kinds.parties import check_key_id
from trustscore.ledger import dsse, keys
from trustscore.settings import from_env


def register(sub: Any) -> None:
    op = sub.add_parser("operator", help="operator decisions signed with the log key")
    actions = op.add_subparsers(dest="operator_command", required=True, metavar="ACTION")
    for name, action, what in (
        ("approve-marketplace", "approve", "let a registered marketplace's events count at full weight"),
        ("retire-marketplace", "retire", "stop counting a marketplace's events at full weight"),
    ):
        p = actions.add_parser(name, help=what)
        p.add_argument("marketplace", help="the marketplace's key id (ts1_...)")
        p.add_argument(
            "--log-key",
            type=Path,
            help="the log key file (default: log.key in the data directory, env TRUSTSCORE_DATA_DIR)",
        )
        p.add_argument("--server", required=True, help="trustscore server URL")
        p.set_defaults(func=run, action=action)


def run(args: argparse.Namespace) -> int:
    action: Action = args.action
    check_key_id(args.marketplace, what="marketplace")
    path = args.log_key or from_env().log_key_file
    if not path.exists():
        raise InvalidInput(f"no log key at {path}; pass --log-key")
    key = keys.read_key_file(path)
    envelope = dsse.sign(make_approval(operator=key.id, marketplace=args.marketplace, action=action), [key])
    with LogClient(args.server) as client:
        [entry] = client.submit(envelope)
    print(f"{action}: {args.marketplace}")
    print(f"index: {entry['index']}")
    return 0
