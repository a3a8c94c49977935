"""Test helpers: real keys, real signed statements."""

from __future__ import annotations

from trustscore.cli.agent import card_envelope
from trustscore.ledger import dsse, keys


def new_card(name: str = "agent", **kw: object) -> tuple[keys.SigningKey, dsse.Envelope]:
    key = keys.SigningKey.generate()
    return key, card_envelope(key, name, **kw)  # type: ignore[arg-type]
