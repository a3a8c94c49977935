"""Times a submitter claims are bounded on both sides: not in the future (evidence would escape decay)
and not before 1970-01-01 (no agent's evidence is older, and trustscore-v3's anchored decay cannot
rate times 960 half-lives, about 79 years, before its anchor). A refused statement writes nothing."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from litestar.testing import AsyncTestClient

from tests.helpers import new_card
from trustscore.api.app import create_app
from trustscore.kinds.settlements import make_settlement
from trustscore.ledger import dsse, keys
from trustscore.settings import Settings


def body(env: Any) -> bytes:
    return msgspec.json.encode(env)


async def size(client: Any) -> int:
    return len((await client.get("/v1/log/entries", params={"start": 0})).json()["entries"])


def settlement(seller: keys.SigningKey, buyer: keys.SigningKey, deal: str, **times: str) -> bytes:
    statement = make_settlement(
        deal_id=deal,
        seller=seller.id,
        buyer=buyer.id,
        reporter_role="buyer",
        delivery="pass",
        settled_at=times["settled_at"],
        issued_at=times.get("issued_at"),
    )
    return body(dsse.sign(statement, [buyer]))


@pytest.mark.parametrize(
    ("times", "message"),
    [
        (
            {"settled_at": "1969-12-31T23:59:59.999999Z"},
            "settled_at 1969-12-31T23:59:59.999999Z is before 1970",
        ),
        ({"settled_at": "1900-01-01T00:00:00Z"}, "settled_at 1900-01-01T00:00:00Z is before 1970"),
        (
            {"settled_at": "2026-11-29T00:00:00Z", "issued_at": "0001-01-01T00:00:00Z"},
            "issued_at 0001-01-01T00:00:00Z is before 1970",
        ),
        ({"settled_at": "2999-01-01T00:00:00Z"}, "settled_at 2999-01-01T00:00:00Z is in the future"),
    ],
)
async def test_a_claimed_time_out_of_bounds_is_refused_and_writes_nothing(
    settings: Settings, dsn: str, times: dict[str, str], message: str
) -> None:
    async with AsyncTestClient(app=create_app(settings, dsn)) as client:
        seller, seller_card = new_card("seller")
        buyer, buyer_card = new_card("buyer")
        for card in (seller_card, buyer_card):
            assert (await client.post("/v1/log/entries", content=body(card))).status_code == 201
        before = await size(client)
        refused = await client.post("/v1/settlements", content=settlement(seller, buyer, "d1", **times))
        assert refused.status_code == 400, refused.text
        assert refused.headers["content-type"].startswith("application/problem+json")
        assert message in refused.json()["detail"]
        assert await size(client) == before
        # The boundary itself is accepted.
        first = await client.post(
            "/v1/settlements", content=settlement(seller, buyer, "d2", settled_at="1970-01-01T00:00:00Z")
        )
        assert first.status_code == 201, first.text
        assert await size(client) == before + 1
