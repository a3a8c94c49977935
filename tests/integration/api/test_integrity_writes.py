"""Issue #10 attacks on writes: a report re-signed with a new nonce, a duplicate settlement that spends
the signer's allowance, and one address writing thousands of cards through batch POSTs. Each of these
tests failed on the code before the defence (docs/service.md, "Limits and duplicates")."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import msgspec
import pytest
from litestar.testing import AsyncTestClient

from tests.helpers import new_card
from trustscore import canonical
from trustscore.api.app import create_app
from trustscore.cli.agent import card_envelope
from trustscore.exams.loader import DEFAULT_PUBLIC_DIR, ExamDirs, load_exam
from trustscore.kinds.settlements import make_settlement
from trustscore.ledger import dsse, keys
from trustscore.sdk import agent_from_spec, run_exam
from trustscore.sdk.runner import sign_run
from trustscore.settings import Settings

AGENTS = DEFAULT_PUBLIC_DIR.parent / "examples" / "agents" / "scripted.py"


def body(env: Any) -> bytes:
    return msgspec.json.encode(env)


async def size(client: Any) -> int:
    return len((await client.get("/v1/log/entries", params={"start": 0})).json()["entries"])


@pytest.fixture(scope="module")
def integrity_run() -> Any:
    exam = load_exam("integrity@1", ExamDirs())
    return run_exam(exam, agent_from_spec(f"python:{AGENTS}:good"))


def renonce(envelope: dsse.Envelope, key: keys.SigningKey, nonce: str, **changes: Any) -> dsse.Envelope:
    raw = json.loads(canonical.b64decode(envelope.payload))
    raw["predicate"]["nonce"] = nonce
    raw["predicate"].update(changes)
    return dsse.sign(json.dumps(raw).encode(), [key])


async def test_resigned_report_is_a_duplicate_not_new_evidence(
    settings: Settings, dsn: str, integrity_run: Any
) -> None:
    """The same answers re-signed with a new nonce (and new timing) are the same report: 200 with the
    first index, nothing written, no allowance spent."""
    tight = replace(settings, key_rate=0.001, key_burst=2)  # the card and one report
    async with AsyncTestClient(app=create_app(tight, dsn)) as client:
        key, card = new_card("examinee")
        assert (await client.post("/v1/log/entries", content=body(card))).status_code == 201
        envelope = sign_run(integrity_run, key)
        first = await client.post("/v1/reports", content=body(envelope))
        assert first.status_code == 201, first.text
        before = await size(client)
        for n in range(3):
            copy = renonce(envelope, key, f"another-nonce-{n:04d}-xxxxxxxx", elapsed_ms=12345 + n)
            again = await client.post("/v1/reports", content=body(copy))
            assert again.status_code == 200, again.text  # not 201, and not 429: a duplicate costs nothing
            assert again.json()["report_index"] == first.json()["report_index"]
            assert again.json()["evidence_index"] == first.json()["evidence_index"]
            assert again.json()["duplicate"] is True
        # The exact replay too.
        exact = await client.post("/v1/reports", content=body(envelope))
        assert exact.status_code == 200 and exact.json()["report_index"] == first.json()["report_index"]
        assert await size(client) == before


async def test_duplicate_settlement_is_200_and_free(settings: Settings, dsn: str) -> None:
    tight = replace(settings, key_rate=0.001, key_burst=2)  # the card and one settlement
    async with AsyncTestClient(app=create_app(tight, dsn)) as client:
        seller, seller_card = new_card("seller")
        buyer, buyer_card = new_card("buyer")
        for card in (seller_card, buyer_card):
            assert (await client.post("/v1/log/entries", content=body(card))).status_code == 201
        settlement = dsse.sign(
            make_settlement(
                deal_id="d1",
                seller=seller.id,
                buyer=buyer.id,
                reporter_role="buyer",
                delivery="pass",
                settled_at="2026-11-29T00:00:00Z",
            ),
            [buyer],
        )
        first = await client.post("/v1/settlements", content=body(settlement))
        assert first.status_code == 201, first.text
        for _ in range(3):  # the buyer's burst is spent: a duplicate that charged would be refused with 429
            again = await client.post("/v1/settlements", content=body(settlement))
            assert again.status_code == 200, again.text
            assert again.json()["index"] == first.json()["index"] and again.json()["duplicate"] is True


async def test_address_limit_counts_entries_not_requests(settings: Settings, dsn: str) -> None:
    """One address may not write thousands of cards in one go by packing them into batch POSTs."""
    limited = replace(settings, address_rate_per_minute=600, address_burst=100)
    async with AsyncTestClient(app=create_app(limited, dsn)) as client:
        cards = [card_envelope(keys.SigningKey.generate(), f"flood-{i}") for i in range(300)]
        codes = [
            (await client.post("/v1/log/entries", content=body(cards[i : i + 60]))).status_code
            for i in range(0, 300, 60)
        ]
        assert codes[0] == 201 and 429 in codes, codes
        assert await size(client) <= 100
        # Duplicates cost nothing: the first batch again is answered 200 even though the budget is spent.
        again = await client.post("/v1/log/entries", content=body(cards[:60]))
        assert again.status_code == 200, again.text


async def test_other_answers_under_a_used_nonce_are_a_replay_and_the_same_answers_the_first_report(
    settings: Settings, dsn: str, integrity_run: Any
) -> None:
    """Both pre-grading questions (graded before? nonce used?) are answered by one lookup: new answers
    under a nonce the agent already used are refused (409) and write nothing; the first answers under
    it are the first report (200)."""
    async with AsyncTestClient(app=create_app(settings, dsn)) as client:
        key, card = new_card("examinee")
        assert (await client.post("/v1/log/entries", content=body(card))).status_code == 201
        envelope = sign_run(integrity_run, key)
        first = await client.post("/v1/reports", content=body(envelope))
        assert first.status_code == 201, first.text
        before = await size(client)
        nonce = json.loads(canonical.b64decode(envelope.payload))["predicate"]["nonce"]
        careless = run_exam(
            load_exam("integrity@1", ExamDirs()), agent_from_spec(f"python:{AGENTS}:careless")
        )
        other = renonce(sign_run(careless, key), key, nonce)
        replay = await client.post("/v1/reports", content=body(other))
        assert replay.status_code == 409 and "nonce" in replay.text, replay.text
        again = await client.post("/v1/reports", content=body(envelope))
        assert again.status_code == 200 and again.json()["report_index"] == first.json()["report_index"]
        assert await size(client) == before
