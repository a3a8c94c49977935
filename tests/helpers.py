"""Test helpers: real keys, real signed statements."""

from __future__ import annotations

from typing import Any

import pytest

from trustscore.cli.agent import card_envelope
from trustscore.ledger import dsse, keys


def new_card(name: str = "agent", **kw: object) -> tuple[keys.SigningKey, dsse.Envelope]:
    key = keys.SigningKey.generate()
    return key, card_envelope(key, name, **kw)  # type: ignore[arg-type]


def count_calls(monkeypatch: pytest.MonkeyPatch, owner: object, name: str) -> list[int]:
    """``owner.name`` replaced by itself counting its calls: the count is the returned list's one item."""
    calls = [0]
    real = getattr(owner, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, counted)
    return calls
