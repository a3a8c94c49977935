"""``trustscore subscribe`` / ``unsubscribe`` (signed subscription statements) and ``trustscore
subscription deliveries`` (a subscription's delivery attempts). docs/webhooks.md."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from trustscore.cli import common
from trustscore.client import LogClient
from trustscore.kinds.subscriptions import EVENT_TYPES, MAX_THRESHOLD, make_revocation, make_subscription
from trustscore.ledger import dsse, keys


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "subscribe", help="subscribe a URL to webhook events (signed)"
    )
    p.add_argument(
        "url", help="the http(s) URL events are POSTed to (public in the log: put no secret in it)"
    )
    p.add_argument("--key", type=Path, required=True, help="your (the subscriber's) registered key file")
    p.add_argument(
        "--event", action="append", choices=EVENT_TYPES, required=True, help="an event type (repeatable)"
    )
    p.add_argument("--agent", action="append", default=[], help="an agent id (repeatable; none: every agent)")
    p.add_argument(
        "--threshold",
        type=common.bounded(0, MAX_THRESHOLD),
        default=0,
        help="rating.changed only for a change of at least this many points (0: any)",
    )
    p.add_argument("--server", required=True, help="trustscore server URL")
    common.add_json(p)
    p.set_defaults(func=subscribe)

    u: argparse.ArgumentParser = sub.add_parser("unsubscribe", help="revoke a webhook subscription (signed)")
    u.add_argument(
        "subscription", type=common.bounded(0, 2**62), help="the subscription's id (its log index)"
    )
    u.add_argument("--key", type=Path, required=True, help="the subscriber's key file")
    u.add_argument("--server", required=True, help="trustscore server URL")
    common.add_json(u)
    u.set_defaults(func=unsubscribe)

    s: argparse.ArgumentParser = sub.add_parser("subscription", help="read a webhook subscription")
    ss = s.add_subparsers(dest="subscription_command", required=True, metavar="COMMAND")
    d: argparse.ArgumentParser = ss.add_parser(
        "deliveries", help="delivery attempts and outcomes, newest first"
    )
    d.add_argument(
        "subscription", type=common.bounded(0, 2**62), help="the subscription's id (its log index)"
    )
    d.add_argument("--limit", type=common.bounded(1, 1000), default=20, help="attempts to show")
    d.add_argument("--after", help="the cursor of the next page, from a previous answer")
    d.add_argument("--server", required=True, help="trustscore server URL")
    common.add_json(d)
    d.set_defaults(func=deliveries)


def subscribe(args: argparse.Namespace) -> int:
    key = keys.read_key_file(args.key)
    agents = [common.agent_id(a) for a in args.agent]
    statement = make_subscription(  # checked here with the server's rules before sending
        subscriber=key.id,
        url=args.url,
        events=list(dict.fromkeys(args.event)),
        agents=agents,
        threshold=args.threshold,
    )
    with LogClient(args.server) as client:
        out = client.post_json("/v1/subscriptions", dsse.sign(statement, [key]))
    common.emit(
        args,
        {"subscription": out["index"], "url": args.url, "subscriber": key.id},
        [f"subscription {out['index']}: {', '.join(args.event)} -> {args.url}"],
    )
    return 0


def unsubscribe(args: argparse.Namespace) -> int:
    key = keys.read_key_file(args.key)
    statement = make_revocation(subscriber=key.id, subscription=args.subscription)
    with LogClient(args.server) as client:
        out = client.post_json("/v1/subscriptions", dsse.sign(statement, [key]))
    common.emit(
        args,
        {"subscription": args.subscription, "revocation": out["index"]},
        [f"subscription {args.subscription} revoked: entry {out['index']}"],
    )
    return 0


def deliveries(args: argparse.Namespace) -> int:
    params: dict[str, Any] = {"limit": args.limit}
    if args.after:
        params["after"] = args.after
    with LogClient(args.server) as client:
        page = client.get_json(f"/v1/subscriptions/{args.subscription}/deliveries", params)
    lines = [
        f"subscription {args.subscription}: {page['delivered']} delivered, {page['pending']} pending, {page['dead']} dead"
    ]
    for a in page["attempts"]:
        outcome = a["status"] if a["error"] is None else a["error"]
        lines.append(
            f"{a['at']}  {a['event_id']}  {a['type']}  attempt {a['attempt']}  {outcome}  {a['millis']} ms  {a['state']}"
        )
    if page["next"]:
        lines.append(f"more: --after {page['next']}")
    common.emit(args, page, lines)
    return 0
