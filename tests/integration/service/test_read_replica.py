"""``trustscore serve --read-database-url``: public reads from a real streaming replica (``pg_basebackup``
of a primary made with the same PostgreSQL binaries), visible when it lags and never wrong.

While the replica's WAL replay is paused the service keeps writing to the primary; its reads still come
from the replica, name the older tree size, and prove against the checkpoint they name. What the replica
cannot answer yet (a newer tree size, an entry or a key it has not replayed) comes from the primary.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import msgspec
import pytest

from tests.helpers import new_card
from tests.integration import pgcluster
from tests.integration.service.conftest import ServerProcess
from trustscore import canonical
from trustscore.kinds.approvals import make_approval
from trustscore.kinds.parties import make_party_card
from trustscore.kinds.settlements import make_settlement
from trustscore.ledger import checkpoint, dsse, keys, merkle, note, tiles

pytestmark = pytest.mark.skipif(
    pgcluster.pg_bin() is None,
    reason="no PostgreSQL server binaries (initdb, pg_ctl, pg_basebackup, postgres) to make a replica with",
)


def post(http: httpx.Client, path: str, envelope: Any) -> dict[str, Any]:
    r = http.post(path, content=msgspec.json.encode(envelope))
    assert r.status_code in (200, 201), r.text
    data: dict[str, Any] = r.json()
    return data


def approved_marketplace(http: httpx.Client, log_key: keys.SigningKey) -> keys.SigningKey:
    """A marketplace the operator approved: its settlements count in full (docs/methodology.md)."""
    market = keys.SigningKey.generate()
    post(
        http,
        "/v1/log/entries",
        dsse.sign(make_party_card(market.public_key, "market", "marketplace"), [market]),
    )
    approval = make_approval(operator=log_key.id, marketplace=market.id, action="approve")
    post(http, "/v1/log/entries", dsse.sign(approval, [log_key]))
    return market


def settle(http: httpx.Client, seller: str, buyer: keys.SigningKey, deal: str) -> int:
    """A confirmed settlement of ``deal`` with ``seller``, reported by ``buyer``; its log index."""
    statement = make_settlement(
        deal_id=deal,
        seller=seller,
        buyer=buyer.id,
        reporter_role="buyer",
        settled_at="2026-11-30T00:00:00Z",
        delivery="pass",
        confirmed=True,
    )
    index: int = post(http, "/v1/settlements", dsse.sign(statement, [buyer]))["index"]
    return index


def signed_checkpoint(http: httpx.Client, verifier: note.Verifier) -> checkpoint.Checkpoint:
    r = http.get("/v1/log/checkpoint")
    assert r.status_code == 200, r.text
    return checkpoint.open_checkpoint(r.text, verifier, None)


def wait_for(what: str, probe: Any, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := probe():
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def primary_size(pg: pgcluster.Replicated) -> int:
    size = asyncio.run(pg.primary.fetchval("SELECT coalesce(max(size), 0) FROM checkpoints"))
    assert isinstance(size, int)
    return size


def checkpoint_scans(cluster: pgcluster.Cluster) -> int:
    """Scans of the checkpoints table counted by ``cluster``'s own statistics (a standby keeps its own)."""
    scans = asyncio.run(
        cluster.fetchval(
            "SELECT coalesce(seq_scan, 0) + coalesce(idx_scan, 0) FROM pg_stat_user_tables"
            " WHERE relname = 'checkpoints'"
        )
    )
    assert isinstance(scans, int)
    return scans


def items(page: dict[str, Any]) -> list[tuple[int, int]]:
    return [(e["index"], e["seq"]) for e in page["items"]]


def primary_evidence(pg: pgcluster.Replicated, agent: str, below: int) -> list[tuple[int, int]]:
    """(index, seq) of ``agent``'s evidence from entries below ``below``, as the primary has it."""

    async def rows() -> list[tuple[int, int]]:
        conn = await asyncpg.connect(pg.primary.dsn())
        try:
            found = await conn.fetch(
                "SELECT idx, seq FROM evidence WHERE agent = $1 AND idx < $2 ORDER BY idx, seq", agent, below
            )
        finally:
            await conn.close()
        return [(r["idx"], r["seq"]) for r in found]

    return asyncio.run(rows())


def fallbacks(http: httpx.Client, kind: str) -> float:
    """The server's count of reads of ``kind`` the replica could not answer (from /metrics)."""
    prefix = f'trustscore_read_fallbacks_total{{kind="{kind}"}} '
    lines = [ln for ln in http.get("/metrics").text.splitlines() if ln.startswith(prefix)]
    return float(lines[0].removeprefix(prefix)) if lines else 0.0


def proves(http: httpx.Client, cp: checkpoint.Checkpoint, index: int) -> None:
    """Entry ``index`` is in the tree ``cp`` names, by the server's inclusion proof."""
    [entry] = http.get("/v1/log/entries", params={"start": index, "end": index + 1}).json()["entries"]
    r = http.get("/v1/log/proof/inclusion", params={"index": index, "size": cp.size})
    assert r.status_code == 200, r.text
    proof = [canonical.b64decode(h) for h in r.json()["proof"]]
    merkle.verify_inclusion(canonical.b64decode(entry["leaf_hash"]), index, cp.size, proof, cp.root)


def test_reads_come_from_a_lagging_replica_name_their_size_and_stay_consistent(tmp_path: Path) -> None:
    with pgcluster.replicated() as pg:
        primary, replica = pg.primary.dsn(), pg.replica.dsn()
        server = ServerProcess(tmp_path / "data", primary, env={"TRUSTSCORE_READ_DATABASE_URL": replica})
        with server, httpx.Client(base_url=server.url, timeout=30) as http:
            verifier = note.parse_verifier_key(server.verifier_key())
            seller_key, seller_card = new_card("seller")
            post(http, "/v1/log/entries", seller_card)
            market = approved_marketplace(http, keys.read_key_file(server.data_dir / "log.key"))
            first = settle(http, seller_key.id, market, "deal-1")
            rating = wait_for(
                "a rating covering the settlement",
                lambda: (
                    (r := http.get(f"/v1/agents/{seller_key.id}/rating")).status_code == 200
                    and r.json()["log_size"] > first
                    and r.json()
                ),
            )
            wait_for("a checkpoint covering the settlement", lambda: primary_size(pg) > first)
            asyncio.run(pg.caught_up())

            # Reads come from the replica: its own statistics count the service's reads of checkpoints.
            reads_before = checkpoint_scans(pg.replica)
            cp1 = signed_checkpoint(http, verifier)
            for _ in range(4):
                assert signed_checkpoint(http, verifier) == cp1
            assert cp1.size == primary_size(pg)
            wait_for(
                "the replica's statistics to count five reads of checkpoints",
                lambda: checkpoint_scans(pg.replica) >= reads_before + 5,
            )
            proves(http, cp1, first)
            assert rating["log_size"] <= cp1.size
            ready = http.get("/readyz")
            assert ready.status_code == 200 and "replica: checkpoint" in ready.text, ready.text

            # The replica stops replaying; the service goes on writing to the primary.
            asyncio.run(pg.replica.fetchval("SELECT pg_wal_replay_pause()"))
            late_key, late_card = new_card("late")
            paused_at = post(http, "/v1/log/entries", late_card)["entries"][0]["index"]
            second = settle(http, seller_key.id, market, "deal-2")
            wait_for("the primary's checkpoint covering the new entries", lambda: primary_size(pg) > second)
            size2 = primary_size(pg)

            # A read from the lagging replica names the older size, and proves against it.
            lagging = signed_checkpoint(http, verifier)
            assert lagging == cp1, "the checkpoint read moved although the replica is paused"
            proves(http, lagging, first)
            assert http.get("/checkpoint").text == http.get("/v1/log/checkpoint").text  # tiles: the replica's
            tail = http.get("/v1/log/entries", params={"start": cp1.size}).json()
            assert tail == {"entries": [], "next": None}  # following the tail: what the replica holds
            page = http.get(f"/v1/agents/{seller_key.id}/evidence").json()
            assert first < page["log_size"] <= paused_at, page  # what the replica had projected
            assert items(page) == primary_evidence(pg, seller_key.id, page["log_size"])
            assert {i for i, _ in items(page)} == {first}
            ready = http.get("/readyz")
            assert f"replica: checkpoint {cp1.size} of {size2} ({size2 - cp1.size} behind" in ready.text

            # What the replica has not replayed yet but the primary has comes from the primary.
            before = {k: fallbacks(http, k) for k in ("proof", "entries", "key")}
            r = http.get("/v1/log/proof/consistency", params={"from": cp1.size, "to": size2})
            assert r.status_code == 200, r.text
            consistency = [canonical.b64decode(h) for h in r.json()["proof"]]
            r = http.get("/v1/log/proof/inclusion", params={"index": second, "size": size2})
            assert r.status_code == 200, r.text
            r = http.get("/v1/log/entries", params={"start": second, "end": second + 1})
            assert [e["index"] for e in r.json()["entries"]] == [second]
            beyond = http.get("/v1/log/entries", params={"start": cp1.size, "end": size2 + 1000}).json()
            assert [e["index"] for e in beyond["entries"]] == list(range(cp1.size, size2))
            assert http.get(f"/v1/log/keys/{late_key.id}").status_code == 200
            newest = tiles.tile_at(0, (size2 - 1) // tiles.WIDTH, size2)  # a tile only the primary has yet
            r = http.get("/" + newest.path())
            assert r.status_code == 200 and len(r.content) == 32 * newest.width, r.text
            assert http.get(f"/v1/agents/{late_key.id}").status_code == 200
            after = {k: fallbacks(http, k) for k in ("proof", "entries", "key")}
            assert after["proof"] >= before["proof"] + 2 and after["entries"] > before["entries"], after
            assert after["key"] > before["key"], after
            r = http.get("/v1/log/proof/inclusion", params={"index": 0, "size": size2 + 1000})
            assert r.status_code == 404 and r.json()["type"].endswith("/not-yet-integrated"), r.text

            # Replay resumes: the replica catches up, and its new checkpoint extends the one it named.
            asyncio.run(pg.replica.fetchval("SELECT pg_wal_replay_resume()"))
            asyncio.run(pg.caught_up())
            cp2 = signed_checkpoint(http, verifier)
            assert cp2.size >= size2
            if cp2.size == size2:
                checkpoint.verify_consistent(cp1, cp2, consistency)
            r = http.get("/v1/log/proof/consistency", params={"from": cp1.size, "to": cp2.size})
            checkpoint.verify_consistent(cp1, cp2, [canonical.b64decode(h) for h in r.json()["proof"]])
            proves(http, cp2, second)
            page = wait_for(
                "the replica's evidence page to cover the second settlement",
                lambda: (
                    (p := http.get(f"/v1/agents/{seller_key.id}/evidence").json())["log_size"] > second and p
                ),
            )
            assert items(page) == primary_evidence(pg, seller_key.id, page["log_size"])
            assert {i for i, _ in items(page)} == {first, second}

            # A replica that goes away takes the process out of rotation; writes still work meanwhile.
            pg.replica.stop()
            ready = http.get("/readyz")
            assert ready.status_code == 503 and ready.text == "read database unreachable\n", ready.text
            third = settle(http, seller_key.id, market, "deal-3")
            wait_for(
                "the primary to integrate a write made while the replica is down",
                lambda: primary_size(pg) > third,
            )
