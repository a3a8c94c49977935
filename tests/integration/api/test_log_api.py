"""The log over HTTP: append, checkpoints, entries, proofs, and refusing bad input without writing."""

from __future__ import annotations

import asyncio
import base64
import json
import secrets
from dataclasses import replace
from typing import Any

import msgspec
from litestar import Litestar
from litestar.testing import AsyncTestClient

from tests.helpers import new_card
from trustscore import canonical
from trustscore.api.app import create_app
from trustscore.kinds.cards import AGENT_CARD, AgentCard, card_subject
from trustscore.ledger import checkpoint, dsse, merkle, note, statements
from trustscore.settings import Settings

Client = AsyncTestClient[Litestar]
FIRST = 2  # entries 0 and 1 are the server's service cards (grader+snapshot, re-verifier)


def body(env: Any) -> bytes:
    return msgspec.json.encode(env)


async def wait_for_size(client: Client, size: int) -> checkpoint.Checkpoint:
    vkey = (await client.get("/v1/log/key")).text.strip()
    verifier = note.parse_verifier_key(vkey)
    for _ in range(200):
        r = await client.get("/v1/log/checkpoint")
        if r.status_code == 200:
            cp = checkpoint.open_checkpoint(r.text, verifier, None)
            if cp.size >= size:
                return cp
        await asyncio.sleep(0.02)
    raise AssertionError(f"log never reached size {size}")


async def entry_count(client: Client) -> int:
    r = await client.get("/v1/log/entries", params={"start": 0})
    return len(r.json()["entries"])


async def test_append_one_and_prove_inclusion(client: Client) -> None:
    key, env = new_card("alpha", endpoint="http://127.0.0.1:9/agent")
    r = await client.post("/v1/log/entries", content=body(env))
    assert r.status_code == 201, r.text
    [entry] = r.json()["entries"]
    i = entry["index"]
    assert i == FIRST and entry["duplicate"] is False
    leaf = dsse.leaf_bytes(env)
    assert base64.b64decode(entry["leaf_hash"]) == merkle.leaf_hash(leaf)

    cp = await wait_for_size(client, i + 1)
    got = (await client.get("/v1/log/entries", params={"start": i, "end": i + 1})).json()["entries"]
    assert base64.b64decode(got[0]["leaf"]) == leaf
    proof = (await client.get("/v1/log/proof/inclusion", params={"index": i, "size": cp.size})).json()[
        "proof"
    ]
    merkle.verify_inclusion(merkle.leaf_hash(leaf), i, cp.size, [base64.b64decode(h) for h in proof], cp.root)

    k = (await client.get(f"/v1/log/keys/{key.id}")).json()
    assert k["index"] == i and base64.b64decode(k["public_key"]) == key.public_key


async def test_batch_duplicates_and_consistency(client: Client) -> None:
    envs = [new_card(f"agent-{i}")[1] for i in range(50)]
    r = await client.post("/v1/log/entries", content=body(envs[:20]))
    assert [e["index"] for e in r.json()["entries"]] == list(range(FIRST, FIRST + 20))
    old = await wait_for_size(client, FIRST + 20)
    # The same statements again, mixed with new ones: old ones get their first index back.
    r = await client.post("/v1/log/entries", content=body(envs[10:50]))
    got = r.json()["entries"]
    assert [e["index"] for e in got] == list(range(FIRST + 10, FIRST + 50))
    assert [e["duplicate"] for e in got] == [True] * 10 + [False] * 30
    new = await wait_for_size(client, FIRST + 50)
    r = await client.get("/v1/log/proof/consistency", params={"from": old.size, "to": new.size})
    proof = [base64.b64decode(h) for h in r.json()["proof"]]
    checkpoint.verify_consistent(old, new, proof)
    # A resubmission of an old statement alone returns 200 and writes nothing.
    r = await client.post("/v1/log/entries", content=body(envs[0]))
    assert r.status_code == 200 and r.json()["entries"][0] == {
        "index": FIRST,
        "leaf_hash": canonical.b64encode(merkle.leaf_hash(dsse.leaf_bytes(envs[0]))),
        "duplicate": True,
    }


def _resigned(key: Any, mutate: Any) -> dsse.Envelope:
    card = AgentCard(
        nonce="n" * 32,
        issued_at="2026-11-30T00:00:00Z",
        public_key=canonical.b64encode(key.public_key),
        name="x",
    )
    raw = json.loads(statements.make_statement(AGENT_CARD, card_subject(key.public_key), card))
    mutate(raw)
    return dsse.sign(json.dumps(raw).encode(), [key])


async def assert_refused(client: Client, content: bytes, status: int, words: str) -> None:
    before = await entry_count(client)
    r = await client.post("/v1/log/entries", content=content)
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    problem = r.json()
    assert problem["status"] == status and words in problem["detail"], problem
    assert await entry_count(client) == before


async def test_bad_input_is_refused_and_writes_nothing(client: Client) -> None:
    key, good = new_card("good")
    await client.post("/v1/log/entries", content=body(good))
    await assert_refused(client, b"{not json", 400, "not valid JSON")
    await assert_refused(client, b'{"payloadType": 1}', 400, "not a DSSE envelope")
    wrong_type = msgspec.structs.replace(good, payloadType="text/plain")
    await assert_refused(client, body(wrong_type), 422, "payloadType")
    unknown = _resigned(key, lambda s: s.update(predicateType="https://trustscore.dev/predicates/nope/v1"))
    await assert_refused(client, body(unknown), 422, "unknown predicateType")
    bad_b64 = msgspec.structs.replace(good, payload="%%%not-base64")
    await assert_refused(client, body(bad_b64), 400, "not valid base64")
    sig = good.signatures[0]
    flipped = bytearray(base64.b64decode(sig.sig))
    flipped[0] ^= 1
    bad_sig = msgspec.structs.replace(
        good, signatures=[dsse.Signature(keyid=sig.keyid, sig=canonical.b64encode(bytes(flipped)))]
    )
    await assert_refused(client, body(bad_sig), 422, "does not verify")
    # Signed by a different key than the card's own: the claimed signer does not match.
    other, _ = new_card("other")
    k2, env2 = new_card("victim")
    forged = dsse.sign(canonical.b64decode(env2.payload), [other])
    await assert_refused(client, body(forged), 422, "no registered key")
    mismatched = dsse.Envelope(
        payloadType=env2.payloadType,
        payload=env2.payload,
        signatures=[dsse.Signature(keyid=k2.id, sig=forged.signatures[0].sig)],
    )
    await assert_refused(client, body(mismatched), 422, "does not verify")
    # A key id the database cannot even store (a NUL character) is named as malformed, not a 500.
    nul = dsse.Envelope(
        payloadType=env2.payloadType,
        payload=env2.payload,
        signatures=[dsse.Signature(keyid="ts1_ab\u0000cd", sig=forged.signatures[0].sig)],
    )
    await assert_refused(client, body(nul), 400, "not a trustscore key id")
    # One bad envelope in a batch refuses the whole batch.
    await assert_refused(client, body([new_card("a")[1], bad_sig]), 422, "entries[1]")
    # A new statement reusing a nonce of the same signer is a replay.
    replay = _resigned(
        key,
        lambda s: s["predicate"].update(
            nonce=json.loads(canonical.b64decode(good.payload))["predicate"]["nonce"], name="renamed"
        ),
    )
    await assert_refused(client, body(replay), 409, "nonce")
    # In a batch, the replay is named by its position and the batch's new entries are not written.
    await assert_refused(client, body([new_card("b")[1], new_card("c")[1], replay]), 409, "entries[2]: nonce")
    await assert_refused(client, b"[]", 400, "empty batch")
    await assert_refused(client, b"x" * (3 * 1024 * 1024), 413, "")


async def test_problem_json_for_queries(client: Client) -> None:
    r = await client.get("/v1/log/proof/inclusion", params={"index": 5, "size": 3})
    assert r.status_code == 400 and r.headers["content-type"].startswith("application/problem+json")
    r = await client.get("/v1/log/proof/inclusion", params={"index": "x", "size": 3})
    assert r.status_code == 400 and r.json()["type"].endswith("invalid-input")
    r = await client.get("/v1/log/proof/consistency", params={"from": 0, "to": 10**6})
    assert r.status_code == 404 and "beyond the latest checkpoint" in r.json()["detail"]
    r = await client.get("/v1/log/proof/consistency", params={"to": 10**6})
    assert r.status_code == 400 and r.json()["detail"] == "Missing required query parameter 'from'"
    r = await client.get(f"/v1/log/keys/ts1_{secrets.token_hex(20)}")
    assert r.status_code == 404
    r = await client.get("/schema/openapi.json")
    assert r.status_code == 200 and "appendEntries" in r.text


async def test_proof_queries_are_read_as_litestar_read_them(client: Client) -> None:
    """The proof routes parse their query by hand: integers in their one decimal form (as every
    integer parameter since 2026-12-03: ``0.0`` was read as 0), the bounds and messages of the declared
    parameters they replaced, problem+json for each refusal."""
    cp = await wait_for_size(client, FIRST)
    proof = await client.get("/v1/log/proof/inclusion", params={"index": 0, "size": cp.size})
    assert proof.status_code == 200 and proof.headers["content-type"] == "application/json"
    assert proof.json()["index"] == 0 and proof.json()["size"] == cp.size
    other = await client.get(f"/v1/log/proof/inclusion?index=0&size={cp.size}&other=1")
    assert other.status_code == 200 and other.content == proof.content  # unknown names ignored
    digits = "must be an integer in decimal digits"
    refused = {
        "index=x&size=2": f"query parameter 'index' {digits}",
        "index=05&size=2": f"query parameter 'index' {digits}",
        "index=%2B1&size=2": f"query parameter 'index' {digits}",
        "index=0.0&size=2": f"query parameter 'index' {digits}",
        "index=-1&size=2": "index: Expected `int` >= 0",
        f"index=0&size={2**62 + 1}": "size: Expected `int` <= 4611686018427387904",
        "size=2": "Missing required query parameter 'index'",
        "index=0": "Missing required query parameter 'size'",
        "index=0&size=2&size=2": "query parameter 'size' is given more than once",
        "index=&size=2": "query parameter 'index' is empty",
        "index=2&size=2": "need 0 <= index < size",
    }
    for query, detail in refused.items():
        r = await client.get(f"/v1/log/proof/inclusion?{query}")
        assert r.status_code == 400, query
        assert r.headers["content-type"].startswith("application/problem+json")
        assert r.json()["detail"] == detail, query
    r = await client.get("/v1/log/proof/consistency?from=1&to=x")
    assert r.status_code == 400 and r.json()["detail"] == f"query parameter 'to' {digits}"
    r = await client.get(f"/v1/log/proof/consistency?from=1&to={cp.size}")
    assert r.status_code == 200 and r.json()["from"] == 1 and r.json()["to"] == cp.size


async def test_a_page_of_entries_is_bounded_in_bytes(settings: Settings, dsn: str) -> None:
    """The attack: a page was bounded only by its number of entries, so 1,000 large entries (old rating
    snapshots, ~190 KB each) cost one request 977 ms and 192 MiB. A page now also stops once its leaves
    hold ``max_page_bytes`` (at least one entry), says where the next starts, and the pages together
    are the log."""
    settings = replace(settings, max_page_bytes=3_000)
    async with AsyncTestClient(app=create_app(settings, dsn)) as client:
        cards = [new_card(f"paged {i}")[1] for i in range(12)]
        r = await client.post("/v1/log/entries", content=b"[" + b",".join(body(c) for c in cards) + b"]")
        assert r.status_code == 201, r.text
        size = FIRST + 12
        whole: list[dict[str, Any]] = []
        start, pages = 0, 0
        while True:
            page = (await client.get("/v1/log/entries", params={"start": start, "end": size})).json()
            leaves = [base64.b64decode(e["leaf"]) for e in page["entries"]]
            assert leaves and sum(map(len, leaves[:-1])) < 3_000, [len(x) for x in leaves]  # then it stops
            whole += page["entries"]
            pages += 1
            if page["next"] is None:
                break
            assert page["next"] == page["entries"][-1]["index"] + 1
            start = page["next"]
        assert [e["index"] for e in whole] == list(range(size)) and pages > 2
        # An entry larger than the budget is a page of its own; the SDK client follows short pages.
        alone = (await client.get("/v1/log/entries", params={"start": FIRST, "end": FIRST + 1})).json()
        assert len(alone["entries"]) == 1 and alone["next"] is None
        tail = (await client.get("/v1/log/entries", params={"start": FIRST})).json()  # no end: the tail
        assert tail["entries"][0]["index"] == FIRST and len(tail["entries"]) < 12 and tail["next"] is not None
