"""Standard Webhooks signatures with asymmetric Ed25519 (``v1a``), purely (docs/webhooks.md).

The signed content is ``{webhook-id}.{webhook-timestamp}.{body}`` as the specification defines; the
signature header is ``v1a,`` + base64 of the Ed25519 signature by the service key, which anyone can check
against the published key (``whpk_`` + base64 of the raw 32-byte public key).

The ``webhook-id`` of a delivery is :func:`message_id`: the event's id and the subscription it is
delivered to. One signing key serves every subscriber, so a signature that covered only the event let
any subscriber replay a genuine delivery to another subscriber's URL within the tolerance (found by an
audit, 2026-12-07); a receiver that checks the id names its subscription refuses it.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Collection, Mapping

from trustscore.errors import SignatureError
from trustscore.ledger import keys
from trustscore.ledger.keys import SigningKey

PUBLIC_PREFIX = "whpk_"
#: How far a delivery's timestamp may be from the receiver's clock (the specification's default).
TOLERANCE_S = 300


def signed_content(msg_id: str, timestamp: int, body: bytes) -> bytes:
    return f"{msg_id}.{timestamp}.".encode() + body


def message_id(event_id: str, subscription: int) -> str:
    """The ``webhook-id`` of ``event_id``'s delivery to ``subscription`` (its log index):
    ``{event id}_s{subscription}`` (no ``.``, which the specification asks ids not to hold), the same for
    every attempt of that delivery. An event delivered to two subscriptions has two ids: its own is the
    body's ``data.id``."""
    return f"{event_id}_s{subscription}"


def headers(key: SigningKey, msg_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """The three Standard Webhooks headers of one delivery of ``body``."""
    sig = base64.b64encode(key.sign(signed_content(msg_id, timestamp, body))).decode("ascii")
    return {"webhook-id": msg_id, "webhook-timestamp": str(timestamp), "webhook-signature": f"v1a,{sig}"}


def public_key_text(public_key: bytes) -> str:
    return PUBLIC_PREFIX + base64.b64encode(public_key).decode("ascii")


def parse_public_key(text: str) -> bytes:
    """The raw Ed25519 key of a ``whpk_`` text; raise SignatureError when malformed."""
    try:
        raw = base64.b64decode(text.removeprefix(PUBLIC_PREFIX), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise SignatureError("webhook public key is not base64") from exc
    if len(raw) != 32:
        raise SignatureError("webhook public key must be 32 bytes")
    return raw


def verify(
    public_key: bytes,
    hdrs: Mapping[str, str],
    body: bytes,
    now: int,
    tolerance: int = TOLERANCE_S,
    *,
    subscription: int | Collection[int] | None = None,
) -> str:
    """The message id of a delivery whose ``v1a`` signature by ``public_key`` and timestamp check out,
    and which was made for ``subscription`` (or one of them) when given (:func:`message_id`); raise
    SignatureError otherwise."""
    low = {k.lower(): v for k, v in hdrs.items()}
    msg_id, stamp, sigs = low.get("webhook-id"), low.get("webhook-timestamp"), low.get("webhook-signature")
    if not (msg_id and stamp and sigs):
        raise SignatureError("missing webhook-id, webhook-timestamp or webhook-signature")
    if not (stamp.isascii() and stamp.isdigit()) or abs(int(stamp) - now) > tolerance:
        raise SignatureError("webhook-timestamp is malformed or outside the tolerance")
    content = signed_content(msg_id, int(stamp), body)
    for item in sigs.split(" "):
        version, _, sig = item.partition(",")
        if version != "v1a":
            continue
        try:
            keys.verify(public_key, content, base64.b64decode(sig, validate=True))
        except (SignatureError, binascii.Error, ValueError):
            continue
        if subscription is not None:
            mine = {subscription} if isinstance(subscription, int) else set(subscription)
            _, sep, named = msg_id.rpartition("_s")
            if not (sep and named.isascii() and named.isdigit() and int(named) in mine):
                raise SignatureError(f"the delivery {msg_id!r} was made for another subscription")
        return msg_id
    raise SignatureError("no valid v1a signature by the service key")
