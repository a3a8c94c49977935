"""Roles and leases (issue #16, docs/operations.md): three ``--role api`` processes and two workers on one
database. The worker holding every job's lease is killed (SIGKILL) twice while evidence arrives; the other
takes each lease over. Afterwards: one rating snapshot per period and per model, none missing; every API
process serves the same ratings, equal to ``trustscore score`` over the exported log; ``log fsck`` clean.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from tests.integration.service.conftest import ServerProcess
from tests.integration.service.test_concurrency_and_crash import fsck_db
from tests.integration.service.test_ladder_cli import cli
from tests.integration.webhooks.parties import agent_card, body
from trustscore import resources
from trustscore.kinds.approvals import make_approval
from trustscore.kinds.events import make_event
from trustscore.kinds.parties import make_party_card
from trustscore.kinds.snapshots import RATING_SNAPSHOT, RatingSnapshot
from trustscore.ledger import audit, dsse, keys
from trustscore.services import logkey
from trustscore.store.leases import NAMESPACE, lease_key

SNAPSHOT_INTERVAL = 3.0
ENV = {
    "TRUSTSCORE_INTEGRATE_INTERVAL": "0.05",
    "TRUSTSCORE_PROJECT_INTERVAL": "0.05",
    "TRUSTSCORE_RATING_REFRESH_INTERVAL": "1",
    "TRUSTSCORE_SNAPSHOT_INTERVAL": str(SNAPSHOT_INTERVAL),
    "TRUSTSCORE_LEASE_POLL": "0.1",
    "TRUSTSCORE_SITTING_SWEEP_INTERVAL": "0.5",
}
LEASES = ("integrator", "ratings", "sitting expiry", "re-verification", "scope runs", "webhook dispatch")
MODELS = ("trustscore-v2", "baseline-v0.3")


def run_sql(dsn: str, sql: str, *args: object) -> list[asyncpg.Record]:
    async def go() -> list[asyncpg.Record]:
        conn = await asyncpg.connect(dsn)
        try:
            return list(await conn.fetch(sql, *args))
        finally:
            await conn.close()

    return asyncio.run(go())


def holders(dsn: str) -> dict[str, str]:
    """Each held lease with its holder's application name (store/leases.py)."""
    rows = run_sql(
        dsn,
        "SELECT l.objid::bigint AS objid, a.application_name FROM pg_locks l "
        "JOIN pg_stat_activity a ON a.pid = l.pid WHERE l.locktype = 'advisory' AND l.granted "
        "AND l.classid = $1 AND l.objsubid = 2 AND l.database = "
        "(SELECT oid FROM pg_database WHERE datname = current_database())",
        NAMESPACE,
    )
    by_key = {lease_key(name) & 0xFFFFFFFF: name for name in LEASES}
    return {by_key[r["objid"]]: r["application_name"] for r in rows if r["objid"] in by_key}


def wait(check: Callable[[], bool], seconds: float = 60.0, what: str = "condition") -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def post(url: str, path: str, content: bytes) -> None:
    r = httpx.post(url + path, content=content, timeout=30)
    assert r.status_code == 201, r.text


@pytest.fixture
def cluster(tmp_path: Path, dsn: str) -> Iterator[dict[str, ServerProcess]]:
    """Two workers, then three API processes, sharing one data directory (the same keys) and database."""
    data = tmp_path / "data"
    procs: dict[str, ServerProcess] = {}
    try:
        for name, role in [("w1", "worker"), ("w2", "worker"), ("a1", "api"), ("a2", "api"), ("a3", "api")]:
            env = {**ENV, "TRUSTSCORE_ROLE": role}
            procs[name] = ServerProcess(data, dsn, env=env, log_path=tmp_path / f"{name}.log")
            procs[name].start()
        yield procs
    finally:
        for p in procs.values():
            p.stop()


def holder_of_all(dsn: str, workers: dict[str, ServerProcess]) -> str:
    """The worker holding the leases (waiting until every lease is held, all by workers)."""
    found: dict[str, str] = {}

    def held() -> bool:
        found.clear()
        found.update(holders(dsn))
        return set(found) == set(LEASES)

    wait(held, what="every lease held")
    names = {h for h in found.values()}
    assert all(" worker " in h for h in names), found  # API processes hold no lease
    pids = {f"pid={w.proc.pid}": n for n, w in workers.items() if w.proc is not None}
    return pids[found["ratings"].rsplit(" ", 1)[1]]


def test_api_processes_and_workers_fail_over_exactly_once(
    cluster: dict[str, ServerProcess], dsn: str, tmp_path: Path
) -> None:
    apis = [cluster[n] for n in ("a1", "a2", "a3")]
    workers = {n: cluster[n] for n in ("w1", "w2")}
    assert httpx.get(workers["w1"].url + "/v1/log/checkpoint").status_code == 404  # a worker serves no API
    # An operator-approved marketplace: its events are evidence with standing (evidence/standing.py).
    market, log_key = keys.SigningKey.generate(), logkey.load_or_create(apis[0].data_dir / "log.key")
    market_card = dsse.sign(make_party_card(market.public_key, "market", "marketplace"), [market])
    post(apis[0].url, "/v1/log/entries", body(market_card))
    approval = make_approval(operator=log_key.id, marketplace=market.id, action="approve")
    post(apis[1].url, "/v1/log/entries", body(dsse.sign(approval, [log_key])))
    agents = []
    for i in range(4):
        key, card = agent_card(f"agent {i}")
        post(apis[i % 3].url, "/v1/log/entries", card)
        agents.append(key.id)
    spread = itertools.cycle(apis)
    refs = itertools.count()
    events = {a: 0 for a in agents}

    def burst(n: int) -> None:
        """``n`` marketplace events about each agent, posted to the API processes in turn."""
        for _ in range(n):
            for a in agents:
                event = make_event(
                    marketplace=market.id,
                    agent=a,
                    event="delivered",
                    ref=f"order-{next(refs)}",
                    occurred_at="2026-11-29T00:00:00Z",
                )
                post(next(spread).url, "/v1/events", body(dsse.sign(event, [market])))
                events[a] += 1

    burst(2)
    for round_ in range(2):  # kill the worker holding the leases while evidence arrives, twice
        victim = holder_of_all(dsn, workers)
        sender = threading.Thread(target=burst, args=(8,))
        sender.start()
        time.sleep(0.5)
        workers[victim].kill9()
        sender.join()
        survivor = holder_of_all(dsn, workers)
        assert survivor != victim
        time.sleep(SNAPSHOT_INTERVAL)  # a period passes under the new holder
        if round_ == 0:
            workers[victim].start()  # to be the survivor of the second kill

    # Freeze: the workers stop; one starts again with a day's snapshot interval and no refresh due. It
    # snapshots at once (the day's period has no snapshot yet: an aligned job runs at start), then nothing
    # more is due, and it catches up.
    final = workers[survivor]
    final.stop()
    final.env |= {"TRUSTSCORE_SNAPSHOT_INTERVAL": "86400", "TRUSTSCORE_RATING_REFRESH_INTERVAL": "86400"}
    final.start()

    def daily() -> list[asyncpg.Record]:
        return run_sql(dsn, "SELECT nonce FROM entry_nonces WHERE nonce LIKE 'snapshot/86400s/%'")

    wait(lambda: len(daily()) == len(MODELS), what="the day's snapshot at start-up")
    size_rows = run_sql(dsn, "SELECT next_index FROM log_sequence")
    size = size_rows[0]["next_index"]

    def caught_up() -> bool:
        [row] = run_sql(dsn, "SELECT log_size FROM ratings_state")
        return bool(row["log_size"] == size)

    wait(caught_up, what="ratings of the whole log")

    # Every API process serves the same ratings, of the whole log.
    served: dict[str, dict[str, Any]] = {}
    for model in MODELS:
        for agent in agents:
            seen = [rating_at(api, agent, model, size) for api in apis]
            assert seen[0] == seen[1] == seen[2]
            served[f"{model} {agent}"] = seen[0]
            assert seen[0]["n"] == events[agent]  # no evidence lost or counted twice
    # The other readers of ratings work in role api too, and agree across processes.
    boards = [httpx.get(f"{api.url}/v1/leaderboard", timeout=30).json() for api in apis]
    assert boards[0] == boards[1] == boards[2]
    assert {row["agent"] for row in boards[0]["ranked"]} == set(agents)
    for api in apis:
        for page in ("/leaderboard", f"/agents/{agents[0]}", f"/v1/agents/{agents[0]}/badge.svg"):
            assert httpx.get(api.url + page, timeout=30).status_code == 200, page

    # ... equal to the offline recompute over the exported log.
    vkey = httpx.get(apis[0].url + "/v1/log/key").text.strip()
    wait(
        lambda: int(httpx.get(apis[1].url + "/v1/log/checkpoint").text.split("\n")[1]) >= size,
        what="a checkpoint of the whole log",
    )
    # API processes run no integrator, yet each follows the checkpoints the worker signs: a rating names
    # the newest checkpoint its process has seen (null there would read "not yet in any checkpoint").
    for api in apis:

        def follows(api: ServerProcess = api) -> bool:
            return bool((rating_at(api, agents[0], MODELS[0], size)["checkpoint_size"] or 0) >= size)

        wait(follows, what=f"{api.url} to follow the checkpoints")
    for model in MODELS:
        ev, sn = tmp_path / f"{model}.evidence.jsonl", tmp_path / f"{model}.snapshots.jsonl"
        cli("evidence", "export", "--server", apis[2].url, "--verifier-key", vkey, "--size", str(size),
            "--model", model, "--evidence-out", ev, "--snapshots-out", sn)  # fmt: skip
        at = {served[f"{model} {a}"]["computed_at"] for a in agents}
        for when in sorted(at):
            weights = resources.path("weights") / f"{model}.toml"
            out = cli("score", "--weights", weights, "--evidence", ev, "--snapshots", sn, "--at", when).stdout
            offline = {r["agent"]: r for r in map(json.loads, out.splitlines())}
            for agent in agents:
                online = served[f"{model} {agent}"]
                if online["computed_at"] != when:
                    continue
                for field in ("total", "adjusted", "grade", "coverage", "confidence", "n", "model_version"):
                    assert offline[agent][field] == online[field], (model, agent, field)
                assert offline[agent]["dimensions"] == {
                    k: v["score"] for k, v in online["dimensions"].items()
                }
                assert offline[agent].get("medals") == online["medals"], (model, agent)

    # One snapshot per period and per model, none missing from the first to the last.
    periods: dict[str, list[int]] = {m: [] for m in MODELS}
    for row in run_sql(dsn, "SELECT leaf FROM entries WHERE kind = $1", RATING_SNAPSHOT.predicate_type):
        snap = audit.parse_leaf(bytes(row["leaf"])).statement.predicate
        assert isinstance(snap, RatingSnapshot)
        prefix, interval, period, model, start = snap.nonce.split("/")
        assert (prefix, start) == ("snapshot", "0")
        if interval == f"{SNAPSHOT_INTERVAL:g}s":
            periods[model].append(int(period))
        else:
            assert interval == "86400s"  # the frozen worker's, one per model (above)
    for model, seen_periods in periods.items():
        assert len(seen_periods) >= 3, periods
        missing = set(range(min(seen_periods), max(seen_periods) + 1)) - set(seen_periods)
        assert not missing and len(seen_periods) == len(set(seen_periods)), (
            model,
            periods,
            workers_said(tmp_path),
        )
    assert "clean" in fsck_db(dsn)


def workers_said(tmp_path: Path) -> list[str]:
    """What the workers logged about leases, snapshots and failures (for a failure's message: in CI the
    processes' logs are gone with the run)."""
    lines = []
    for name in ("w1", "w2"):
        for line in (tmp_path / f"{name}.log").read_text(errors="replace").splitlines():
            if any(w in line for w in ("lease", "snapshot", "failed", "Started server")):
                lines.append(f"{name} {line[:240]}")
    return lines


def rating_at(api: ServerProcess, agent: str, model: str, size: int) -> dict[str, Any]:
    """The rating ``api`` serves once it covers the log prefix [0, ``size``)."""
    for _ in range(1200):
        r = httpx.get(f"{api.url}/v1/agents/{agent}/rating", params={"model": model}, timeout=30)
        if r.status_code == 200 and r.json()["log_size"] == size:
            data: dict[str, Any] = r.json()
            return data
        time.sleep(0.05)
    raise AssertionError(f"{api.url} serves no rating of {agent} at {size}")


def test_a_worker_starting_while_another_holds_the_leases_projects_and_integrates_nothing(
    tmp_path: Path, dsn: str
) -> None:
    """Start-up work is singleton work too: a worker (re)started while the leases are held elsewhere
    must not project or integrate (the holder's in-memory projection would no longer match the database,
    and its next step would fail and reload every evidence item); it does both once it takes the leases."""

    async def go() -> None:
        holder = await asyncpg.connect(dsn)  # stands for a live worker holding both leases
        for name in ("integrator", "ratings"):
            assert await holder.fetchval("SELECT pg_try_advisory_lock($1, $2)", NAMESPACE, lease_key(name))
        api = ServerProcess(tmp_path / "data", dsn, env={**ENV, "TRUSTSCORE_ROLE": "api"})
        worker = ServerProcess(tmp_path / "data", dsn, env={**ENV, "TRUSTSCORE_ROLE": "worker"})
        try:
            await asyncio.to_thread(api.start)
            for i in range(3):
                await asyncio.to_thread(post, api.url, "/v1/log/entries", agent_card(f"agent {i}")[1])
            size = await holder.fetchval("SELECT next_index FROM log_sequence")
            await asyncio.to_thread(worker.start)  # returns once the worker is ready
            await asyncio.sleep(1.0)  # ten lease polls
            assert await holder.fetchval("SELECT next_index FROM projection_state WHERE name = 'log'") == 0
            assert await holder.fetchval("SELECT coalesce(max(size), 0) FROM checkpoints") < size
            await holder.close()  # the holder dies: the worker takes both leases and catches up

            async def caught_up() -> bool:
                conn = await asyncpg.connect(dsn)
                try:
                    projected = await conn.fetchval(
                        "SELECT next_index FROM projection_state WHERE name = 'log'"
                    )
                    signed = await conn.fetchval("SELECT coalesce(max(size), 0) FROM checkpoints")
                finally:
                    await conn.close()
                return bool(projected >= size and signed >= size)

            deadline = time.monotonic() + 60
            while not await caught_up():
                assert time.monotonic() < deadline, "the worker never took the leases over"
                await asyncio.sleep(0.05)
        finally:
            if not holder.is_closed():
                await holder.close()
            await asyncio.to_thread(worker.stop)
            await asyncio.to_thread(api.stop)

    asyncio.run(go())
