"""A re-verification status reads the runs logged since it was last read, not every run again.

An agent's runs grow by one a day, and every rating response, agent page and leaderboard row read and
parsed all of them (~4 KiB and ~44 µs each: a year of daily runs for the 100 agents of the home page was
36,500 leaves per view) and showed them all. The Reverifier now keeps a digest per agent
(reverify/status.py ``Digest``) and reads only the runs after it; a status shows the newest runs and counts
them all, and equals the status computed from every run.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, cast

import asyncpg
import msgspec
import pytest

from tests.unit.reverify.kit import VERIFIER, matching, payload
from trustscore import canonical
from trustscore.exams.loader import DEFAULT_PUBLIC_DIR, ExamDirs
from trustscore.kinds.reverification import REVERIFICATION, Reverification
from trustscore.ledger import dsse, keys, statements
from trustscore.ledger.submission import check, prepare
from trustscore.reverify import status
from trustscore.services import reverify as reverify_service
from trustscore.services.log import LogService
from trustscore.services.reverify import Reverifier, ReverifyConfig
from trustscore.store import db
from trustscore.store.log import LogStore
from trustscore.store.reverify import ReverifyStore

START = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)


async def _log_runs(
    pool: asyncpg.Pool, agent: str, outcomes: str, first_day: int
) -> list[tuple[int, Reverification]]:
    """One signed run of ``agent`` per letter (m: match, x: mismatch), a day apart: (index, statement)."""
    envelopes, parsed = [], []
    for n, o in enumerate(outcomes):
        ran_at = statements.format_time(START + dt.timedelta(days=first_day + n))
        body = payload(items=matching(observed=1000 if o == "m" else 0), agent=agent, ran_at=ran_at)
        envelopes.append(dsse.sign(body, [VERIFIER]))
        p = statements.parse_statement(body).predicate
        assert isinstance(p, Reverification)
        parsed.append(p)
    appended = await LogStore(pool).append(
        [check(prepare(msgspec.to_builtins(e)), lambda _: VERIFIER.public_key) for e in envelopes]
    )
    return [(a.index, p) for a, p in zip(appended, parsed, strict=True)]


class _Counting(ReverifyStore):
    """The real store, counting the leaves its reads return."""

    read = 0

    async def leaves_after(self, kind: str, after: Any) -> dict[str, list[tuple[int, bytes, bytes | None]]]:
        out = await super().leaves_after(kind, after)
        self.read += sum(leaf is not None for rows in out.values() for _, _, leaf in rows)
        return out


async def test_a_status_reads_only_the_runs_logged_since(pool: asyncpg.Pool) -> None:
    a, b, c = (keys.SigningKey.generate().id for _ in range(3))
    store = _Counting(pool)
    config = ReverifyConfig(interval=0)
    # digests()/statuses() read the store only: no log service is needed for them.
    reverifier = Reverifier(
        cast(LogService, None), store, VERIFIER, ExamDirs(DEFAULT_PUBLIC_DIR, None), config
    )
    runs = {a: await _log_runs(pool, a, "x" + "m" * 29, 0), b: await _log_runs(pool, b, "mmx", 0), c: []}
    runs[a] += await _log_runs(pool, a, "m", 30)

    def expected(agent: str) -> status.VerificationStatus:
        return status.summarize(runs[agent], endpoint=None, now=START, interval_s=0)

    first = await reverifier.statuses([a, b, c])
    assert first == {agent: expected(agent) for agent in (a, b, c)}
    assert store.read == 34  # every run, once
    assert first[a].runs == 31 and len(first[a].history) == status.HISTORY_SHOWN
    assert first[a].verified_since == runs[a][1][1].ran_at  # older than every row shown

    assert await reverifier.statuses([a, b, c]) == first
    assert store.read == 34  # nothing new: nothing read

    runs[a] += await _log_runs(pool, a, "xm", 31)
    runs[c] += await _log_runs(pool, c, "m", 0)
    again = await reverifier.statuses([c, a, b])
    assert again == {agent: expected(agent) for agent in (a, b, c)}
    assert store.read == 37  # the three new runs only
    assert again[a].verified_since == runs[a][-1][1].ran_at and again[a].runs == 33


async def test_kept_digests_are_bounded(pool: asyncpg.Pool, monkeypatch: Any) -> None:
    monkeypatch.setattr(reverify_service, "MAX_DIGESTS", 3)
    agents = [keys.SigningKey.generate().id for _ in range(5)]
    runs = {agent: await _log_runs(pool, agent, "m", 0) for agent in agents}
    store = _Counting(pool)
    reverifier = Reverifier(
        cast(LogService, None),
        store,
        VERIFIER,
        ExamDirs(DEFAULT_PUBLIC_DIR, None),
        ReverifyConfig(interval=0),
    )
    for agent in agents:
        (digest,) = (await reverifier.digests([agent])).values()
        assert digest == status.fold(status.Digest(), runs[agent])
    assert list(reverifier._digests) == agents[-3:]  # the most recently read
    await reverifier.digests([agents[0]])  # forgotten: read again, whole
    assert store.read == 6


async def test_a_run_reads_the_last_run_alone(pool: asyncpg.Pool) -> None:
    """A run needs the agent's last run only (its security state, the identical-result check): read alone,
    not through the kept digests, which a period of runs over more agents than are kept would churn."""
    agent = keys.SigningKey.generate().id
    store = ReverifyStore(pool)
    assert await store.last_of(REVERIFICATION.predicate_type, agent) is None
    runs = await _log_runs(pool, agent, "mxm", 0)
    await _log_runs(pool, keys.SigningKey.generate().id, "m", 0)  # another agent's, later in the log
    index, leaf = await store.last_of(REVERIFICATION.predicate_type, agent) or (None, b"")
    assert index == runs[-1][0]
    assert (
        statements.parse_statement(canonical.b64decode(msgspec.json.decode(leaf)["payload"])).predicate
        == runs[-1][1]
    )
    with pytest.raises(TypeError):
        await store.leaves_after(REVERIFICATION.predicate_type, agent)  # type: ignore[arg-type]


async def test_a_log_rewound_under_a_kept_digest_is_read_again(pool: asyncpg.Pool, other_dsn: str) -> None:
    """A kept digest ends with a run the log may no longer hold: the database restored to an earlier state
    (or a standby that lost commits) under a running process, the same indexes then taken by other runs.
    Reading on after the kept index would miss them for good; the digest is used only while the entry it
    ends with is still there (its leaf hash), else the agent's runs are read whole again."""
    agent = keys.SigningKey.generate().id
    before = await _log_runs(pool, agent, "mmm", 0)
    await db.migrate(other_dsn)
    restored_pool = await db.create_pool(other_dsn, min_size=1, max_size=2)
    try:
        restored = await _log_runs(restored_pool, agent, "mx", 0)  # a shorter log, another run at index 1
        assert [i for i, _ in restored] == [i for i, _ in before[:2]]
        reverifier = Reverifier(
            cast(LogService, None),
            ReverifyStore(pool),
            VERIFIER,
            ExamDirs(DEFAULT_PUBLIC_DIR, None),
            ReverifyConfig(interval=0),
        )
        (kept,) = (await reverifier.statuses([agent])).values()
        assert kept.runs == 3 and kept.history[-1].outcome == "match"
        reverifier.store = ReverifyStore(restored_pool)  # the same process, the database behind it rewound
        (now,) = (await reverifier.statuses([agent])).values()
        assert now == status.summarize(restored, endpoint=None, now=START, interval_s=0)
        assert now.runs == 2 and now.history[-1].outcome == "mismatch"
        longer = restored + await _log_runs(
            restored_pool, agent, "mm", 2
        )  # then it grows again, past index 2
        (later,) = (await reverifier.statuses([agent])).values()
        assert later == status.summarize(longer, endpoint=None, now=START, interval_s=0)
    finally:
        await restored_pool.close()
