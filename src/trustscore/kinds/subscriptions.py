"""Webhook subscriptions: a registered party asks to be told of events about agents (docs/webhooks.md).

``subscription/v1`` names the subscriber (its key id; the signer), an ``https``/``http`` URL, the event
types wanted, the agents (none: every agent) and an optional rating threshold in points of the 0..1000
total (an integer: signed payloads carry no floats). ``subscription-revocation/v1`` ends the subscription
at a log index; only its subscriber may sign it. A subscription's id is its log index.
"""

from __future__ import annotations

import hashlib
from typing import Literal, get_args
from urllib.parse import urlsplit

import msgspec

from trustscore.errors import InvalidInput
from trustscore.kinds.parties import check_key_id, new_nonce, now
from trustscore.ledger import statements
from trustscore.ledger.statements import Facts, Kind, Predicate, Statement, Subject, register

EventType = Literal[
    "rating.changed",
    "grade.changed",
    "settlement.negative",
    "event.negative",
    "card.changed",
    "verified.changed",
    "scope.status_changed",
]
EVENT_TYPES: tuple[str, ...] = get_args(EventType)
MAX_URL = 2048
MAX_AGENTS = 1000
MAX_THRESHOLD = 1000
#: Bytes of a POSTed subscription or revocation envelope (the largest legal one, 1,000 agents and a URL of
#: 2,048 characters beyond the BMP, escaped, with four signatures, is ~98 KB).
MAX_SUBSCRIPTION_BYTES = 256 * 1024


class Subscription(Predicate, kw_only=True, frozen=True):
    subscriber: str  # key id of the registered party or agent; the signer
    url: str
    events: list[EventType]
    agents: list[str] = msgspec.field(default_factory=list)  # key ids; empty: every agent
    threshold: int = 0  # rating.changed only when |new total - old total| >= threshold (0: any change)


class SubscriptionRevocation(Predicate, kw_only=True, frozen=True):
    subscriber: str  # key id; must be the subscription's subscriber
    subscription: int  # the log index of the subscription


def check_url(url: str) -> str:
    """``url`` if it is an absolute http(s) URL without credentials or fragment, at most MAX_URL long."""
    if len(url) > MAX_URL or not url.isprintable() or any(c.isspace() for c in url):
        raise InvalidInput(f"url must be 1..{MAX_URL} printable characters without spaces")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise InvalidInput(f"url is not a valid URL: {exc}") from exc
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise InvalidInput("url must be an absolute http:// or https:// URL")
    if parts.username is not None or parts.password is not None or parts.fragment:
        raise InvalidInput("url must carry no credentials and no fragment")
    if port == 0:
        raise InvalidInput("url port must be 1..65535")
    return url


def subscription_subject(subscriber: str, url: str) -> Subject:
    return Subject(name=subscriber, digest={"sha256": hashlib.sha256(url.encode("utf-8")).hexdigest()})


def _check(stmt: Statement, s: Subscription) -> Facts:
    check_key_id(s.subscriber, what="subscriber")
    check_url(s.url)
    if not s.events or len(set(s.events)) != len(s.events):
        raise InvalidInput(f"events must name each wanted type once ({', '.join(EVENT_TYPES)})")
    if len(s.agents) > MAX_AGENTS or len(set(s.agents)) != len(s.agents):
        raise InvalidInput(f"agents must name at most {MAX_AGENTS} distinct agents (none: every agent)")
    for a in s.agents:
        check_key_id(a, what="agents[]")
    if not 0 <= s.threshold <= MAX_THRESHOLD:
        raise InvalidInput(f"threshold must be 0..{MAX_THRESHOLD} rating points")
    if stmt.subject != [subscription_subject(s.subscriber, s.url)]:
        raise InvalidInput("subscription subject must be the subscriber id and the SHA-256 of the url")
    return Facts(signer=s.subscriber, subject=s.subscriber)


def _check_revocation(stmt: Statement, r: SubscriptionRevocation) -> Facts:
    check_key_id(r.subscriber, what="subscriber")
    if not 0 <= r.subscription < 2**63:
        raise InvalidInput("subscription must be a log index")
    if stmt.subject != [revocation_subject(r.subscriber, r.subscription)]:
        raise InvalidInput("revocation subject must be the subscriber id and the SHA-256 of the index")
    return Facts(signer=r.subscriber, subject=r.subscriber)


def revocation_subject(subscriber: str, subscription: int) -> Subject:
    digest = hashlib.sha256(str(subscription).encode("ascii")).hexdigest()
    return Subject(name=subscriber, digest={"sha256": digest})


SUBSCRIPTION = register(Kind(name="subscription", version=1, struct=Subscription, check=_check))
SUBSCRIPTION_REVOCATION = register(
    Kind(name="subscription-revocation", version=1, struct=SubscriptionRevocation, check=_check_revocation)
)
SUBSCRIPTION_KINDS = frozenset({"subscription", "subscription-revocation"})


def make_subscription(
    *,
    subscriber: str,
    url: str,
    events: list[EventType],
    agents: list[str] | None = None,
    threshold: int = 0,
    nonce: str | None = None,
    issued_at: str | None = None,
) -> bytes:
    """Checked statement bytes of a subscription; sign with the subscriber's key."""
    s = Subscription(
        nonce=nonce or new_nonce(),
        issued_at=issued_at or now(),
        subscriber=subscriber,
        url=url,
        events=events,
        agents=sorted(agents or []),
        threshold=threshold,
    )
    payload = statements.make_statement(SUBSCRIPTION, subscription_subject(subscriber, url), s)
    statements.parse_statement(payload)
    return payload


def make_revocation(
    *, subscriber: str, subscription: int, nonce: str | None = None, issued_at: str | None = None
) -> bytes:
    """Checked statement bytes of a subscription's revocation; sign with the subscriber's key."""
    r = SubscriptionRevocation(
        nonce=nonce or new_nonce(),
        issued_at=issued_at or now(),
        subscriber=subscriber,
        subscription=subscription,
    )
    payload = statements.make_statement(
        SUBSCRIPTION_REVOCATION, revocation_subject(subscriber, subscription), r
    )
    statements.parse_statement(payload)
    return payload
