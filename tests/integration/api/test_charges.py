"""A write's charge is all or nothing (LogService.charge): when one allowance refuses it, the others keep
what they had, and the refused request costs its address only the one token any refused write costs
(docs/service.md, "Write limits")."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import msgspec
from litestar.testing import AsyncTestClient

from trustscore.api.app import create_app
from trustscore.cli.agent import card_envelope
from trustscore.ledger import keys
from trustscore.settings import Settings


def body(env: Any) -> bytes:
    return msgspec.json.encode(env)


async def test_a_charge_one_allowance_refuses_spends_none_of_the_others(settings: Settings, dsn: str) -> None:
    """Two cards of one key in one request exceed that key's burst of 1 (refused, 400): the address's
    allowance (a burst of 4) loses only the one token every refused request costs, so three single cards
    of other keys still go through. When the address was charged before the key refused, it lost the two
    statements' tokens as well (twice, once the refused charge is tried again after the lookup)."""
    tight = replace(settings, key_rate=0.001, key_burst=1, address_rate_per_minute=4)
    async with AsyncTestClient(app=create_app(tight, dsn)) as client:
        key = keys.SigningKey.generate()
        both = body([card_envelope(key, "a"), card_envelope(key, "b")])
        refused = await client.post("/v1/log/entries", content=both)
        assert refused.status_code == 400 and "burst" in refused.text, refused.text
        codes = [
            (
                await client.post(
                    "/v1/log/entries", content=body(card_envelope(keys.SigningKey.generate(), f"o{i}"))
                )
            ).status_code
            for i in range(4)
        ]
        assert codes == [201, 201, 201, 429], codes
