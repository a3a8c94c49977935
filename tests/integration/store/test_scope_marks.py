"""The scope runner's marks in projection_state (migration 0019; cases found by review). No app runs here: only the
runners below touch scope_runs, so every step is deterministic."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import asyncpg
import msgspec

from tests.integration.api.test_scope_runs import CountingStore
from trustscore.cli.agent import card_envelope
from trustscore.exams.loader import ExamDirs
from trustscore.kinds.cards import CapabilityDeclaration
from trustscore.ledger import keys
from trustscore.ledger.submission import check, prepare
from trustscore.services.scope_runs import ScopeRunConfig, ScopeRunner, week_salt, week_turn
from trustscore.store.log import LogStore
from trustscore.store.scope import ScopeStore

DECLARATIONS = json.loads(Path("examples/agents/scope_declarations.json").read_text())


async def log_card(pool: asyncpg.Pool, key: keys.SigningKey, model_version: str, name: str = "scoped") -> int:
    env = card_envelope(
        key,
        name,
        endpoint="https://agent.example/api",
        model_version=model_version,
        declarations=[msgspec.convert(d, CapabilityDeclaration) for d in DECLARATIONS["declarations"]],
        non_capabilities=DECLARATIONS["non_capabilities"],
    )
    known = {key.id: bytes(key.public_key)}
    [appended] = await LogStore(pool).append([check(prepare(msgspec.to_builtins(env)), known.get)])
    return appended.index


def runner(
    pool: asyncpg.Pool,
    at: dt.datetime | None = None,
    config: ScopeRunConfig | None = None,
    key: keys.SigningKey | None = None,
) -> ScopeRunner:
    """A new process's runner (a restart, or a lease takeover)."""
    clock: Any = (lambda: at) if at is not None else dt.datetime.now
    kw = {} if at is None else {"clock": clock}
    config = config or ScopeRunConfig()
    key = key or keys.SigningKey.generate()
    return ScopeRunner(None, ScopeStore(pool), key, ExamDirs(), config, **kw)  # type: ignore[arg-type]


async def test_one_process_with_its_clock_ahead_silences_weekly_runs_for_every_process(
    pool: asyncpg.Pool,
) -> None:
    """One runner whose clock is ahead (a VM before NTP sync, a script or test with an injected clock
    pointed at the database) must not make every correct process skip every period up to that date: only
    the exact period marked is skipped."""
    key = keys.SigningKey.generate()
    await log_card(pool, key, "m1")
    now = dt.datetime.now(dt.UTC)
    ahead = runner(pool, now + dt.timedelta(days=400))
    assert await ahead.schedule_weekly() == 1
    await ScopeStore(pool).finish_run(
        key.id, f"week:{ahead.period()}", attempt=0, entry_index=None, reason="done elsewhere"
    )
    correct = runner(pool, now + dt.timedelta(days=7))  # next week on the right clock: not yet scheduled
    assert await correct.schedule_weekly() == 1, "this week's run is never scheduled (for ~56 weeks)"


async def test_a_declaration_change_refused_while_a_run_was_pending_is_never_swept_again(
    pool: asyncpg.Pool,
) -> None:
    """At most one pending run per agent: a new card swept while the agent's previous run is pending (or
    being carried out with the previous card) is refused for now. The mark stays at it, so a restart or
    takeover schedules it once the first run is done."""
    key = keys.SigningKey.generate()
    first = await log_card(pool, key, "m1")
    one = runner(pool)
    assert await one.sweep_cards() == 1  # card:<first>, pending (claimed, being run with card 1)
    second = await log_card(pool, key, "m2")  # a new declared model version
    assert await one.sweep_cards() == 0  # refused: one pending run per agent
    store = ScopeStore(pool)
    await store.finish_run(
        key.id, f"card:{first}", attempt=0, entry_index=None, reason="ran with the first card"
    )
    restarted = runner(pool)
    assert await restarted.sweep_cards() == 1, f"card:{second} is never scheduled"


async def test_a_refused_declaration_change_is_retried_by_the_same_process(pool: asyncpg.Pool) -> None:
    key = keys.SigningKey.generate()
    first = await log_card(pool, key, "m1")
    one = runner(pool)
    assert await one.sweep_cards() == 1
    second = await log_card(pool, key, "m2")
    third = await log_card(pool, keys.SigningKey.generate(), "m1")  # another agent, after it
    assert await one.sweep_cards() == 1  # the other agent's card; the second card is refused for now
    store = ScopeStore(pool)
    assert await store.mark("scope_cards") == second  # held at the refused card, not past it
    assert await one.sweep_cards() == 0  # still pending: refused again, nothing re-read
    await store.finish_run(
        key.id, f"card:{first}", attempt=0, entry_index=None, reason="ran with the first card"
    )
    assert await one.sweep_cards() == 1  # retried
    assert await store.run_known(key.id, f"card:{second}")
    assert await store.mark("scope_cards") == third + 1
    assert await runner(pool).sweep_cards() == 0  # a new process finds nothing left to do


async def change_logged_twice_after_a_sweep(
    pool: asyncpg.Pool,
) -> tuple[keys.SigningKey, ScopeRunner, ScopeStore, int]:
    """An agent whose first card was swept and run; then a new declared model version, logged twice
    (the second time under another name). Returns the agent's key, the runner, the store and the index
    of the newest card."""
    key = keys.SigningKey.generate()
    first = await log_card(pool, key, "m1")
    one = runner(pool)
    assert await one.sweep_cards() == 1
    store = ScopeStore(pool)
    await store.finish_run(key.id, f"card:{first}", attempt=0, entry_index=None, reason="done")
    await log_card(pool, key, "m2")  # a new declared model version ...
    again = await log_card(pool, key, "m2", name="renamed")  # ... and the same declarations again
    return key, one, store, again


async def test_a_declaration_change_logged_again_before_the_sweep_still_gets_its_run(
    pool: asyncpg.Pool,
) -> None:
    """An agent changes its declarations and, before the sweep reads the change, logs the same
    declarations once more (another name; any re-issued card). The sweep compared the newest card with
    the card just before it, the change with itself: no run, and the changed declarations went untested
    until the weekly run. It compares with the agent's card the sweep had passed."""
    key, one, store, again = await change_logged_twice_after_a_sweep(pool)
    assert await one.sweep_cards() == 1, "the declaration change is never run on its own"
    assert await store.run_known(key.id, f"card:{again}")
    assert await one.sweep_cards() == 0
    assert await runner(pool).sweep_cards() == 0  # a new process finds nothing left to do


async def test_a_refused_change_logged_again_is_still_run_after_a_restart(pool: asyncpg.Pool) -> None:
    """The change is refused for now (the agent's run is pending) and the mark holds at it; the agent
    then logs the same declarations again. A new process sweeps from the mark and must still see a
    change: against the card before the mark, not against the changed card."""
    key = keys.SigningKey.generate()
    first = await log_card(pool, key, "m1")
    one = runner(pool)
    assert await one.sweep_cards() == 1  # card:<first>, pending
    second = await log_card(pool, key, "m2")
    assert await one.sweep_cards() == 0  # refused for now
    store = ScopeStore(pool)
    assert await store.mark("scope_cards") == second
    again = await log_card(pool, key, "m2", name="renamed")
    await store.finish_run(key.id, f"card:{first}", attempt=0, entry_index=None, reason="done")
    restarted = runner(pool)
    assert await restarted.sweep_cards() == 1, "the refused change is lost by the restart"
    assert await store.run_known(key.id, f"card:{again}")


async def test_an_agents_first_two_cards_swept_together_get_a_run(pool: asyncpg.Pool) -> None:
    """An agent's first card with declarations gets a run; logged twice before the first sweep (or
    before a new log's first sweep), the first was compared with the second and neither was run."""
    key = keys.SigningKey.generate()
    await log_card(pool, key, "m1")
    again = await log_card(pool, key, "m1", name="renamed")
    assert await runner(pool).sweep_cards() == 1
    assert await ScopeStore(pool).run_known(key.id, f"card:{again}")


async def test_the_week_gives_an_unswept_change_logged_again_its_card_run(pool: asyncpg.Pool) -> None:
    """The weekly scheduling gives an unswept card the run the sweep's rule gives it, in the week's
    place: a change logged twice after the sweep is the card's run, not the week's."""
    key, one, store, again = await change_logged_twice_after_a_sweep(pool)
    assert await one.schedule_weekly() == 1
    assert not await store.run_known(key.id, f"week:{one.period()}")
    assert await store.run_known(key.id, f"card:{again}")
    assert await one.sweep_cards() == 0  # known already


async def test_a_change_and_a_return_in_one_page_after_the_week_skipped_the_agent_still_run(
    pool: asyncpg.Pool,
) -> None:
    """(Review of the comparison with the passed card.) The week left an agent with an unswept change to
    the sweep; the agent then returned to its swept declarations before that sweep. Compared with the
    passed card only, the return looked like no change: neither the week's run nor a card run. The week
    now schedules the change's run, and the return gets its own after it."""
    key = keys.SigningKey.generate()
    store = ScopeStore(pool)
    first = await log_card(pool, key, "m1")
    one = runner(pool)
    assert await one.sweep_cards() == 1
    await store.finish_run(key.id, f"card:{first}", attempt=0, entry_index=None, reason="done")
    changed = await log_card(pool, key, "m2")  # a change, not swept yet
    assert await one.schedule_weekly() == 1  # the change's own run, in the week's place
    back = await log_card(pool, key, "m1", name="back")  # the first card's declarations again
    assert await one.sweep_cards() == 0  # refused for now: the change's run is pending
    await store.finish_run(key.id, f"card:{changed}", attempt=0, entry_index=None, reason="done")
    assert await one.sweep_cards() == 1
    assert await store.run_known(key.id, f"card:{back}"), "the return is never run"


WEEK0 = dt.datetime(2031, 3, 3, 12, tzinfo=dt.UTC)


async def change_swept_past_a_held_mark(
    pool: asyncpg.Pool, at: dt.datetime, plain: int = 0
) -> tuple[keys.SigningKey, ScopeRunner, ScopeStore]:
    """Another agent's changed card is refused for now (its first run is pending), so the mark holds at
    it; after ``plain`` v1 cards of others, this agent's change is swept past the mark and run. Returns
    the agent's key, the runner (its clock at ``at``) and the store."""
    other, key = keys.SigningKey.generate(), keys.SigningKey.generate()
    store = ScopeStore(pool)
    await log_card(pool, other, "m1")
    below = await log_card(pool, key, "m1")
    one = runner(pool, at)
    assert await one.sweep_cards() == 2
    await store.finish_run(key.id, f"card:{below}", attempt=0, entry_index=None, reason="done")
    held = await log_card(pool, other, "m2")
    for _ in range(plain):
        await log_plain_card(pool, keys.SigningKey.generate())
    changed = await log_card(pool, key, "m2")
    assert await one.sweep_cards() == 1  # the other agent's card refused, card:<changed> added
    await store.finish_run(key.id, f"card:{changed}", attempt=0, entry_index=None, reason="done")
    assert await store.mark("scope_cards") == held
    return key, one, store


async def test_a_change_from_a_card_swept_after_a_held_mark_is_run_after_a_restart(
    pool: asyncpg.Pool,
) -> None:
    """(Review.) Another agent's refused card holds the mark; this agent's card A is swept and run past
    it, then it returns to the declarations it had below the mark. A new process sweeps from the mark:
    the return is a change from A, though not from the card below the mark."""
    key, _, store = await change_swept_past_a_held_mark(pool, WEEK0)
    back = await log_card(pool, key, "m1", name="back")
    await runner(pool, WEEK0).sweep_cards()
    assert await store.run_known(key.id, f"card:{back}"), "the change is not run after the restart"


async def test_a_change_the_week_left_to_the_sweep_is_not_lost_by_a_restart(pool: asyncpg.Pool) -> None:
    """(Second review.) The week left an agent with an unswept change to this process's next sweep and
    marked the period done; the process then ended. A new process sweeps from a mark held further back,
    where the same cards look like no change: no card run, and no week's run either. The week now
    schedules the card's run itself."""
    key, one, store = await change_swept_past_a_held_mark(pool, WEEK0)
    later = WEEK0 + dt.timedelta(days=7)
    one.clock = lambda: later
    await log_card(pool, key, "m1", name="c1")  # back to the declarations below the mark ...
    newest = await log_card(pool, key, "m1", name="n")  # ... twice
    await one.schedule_weekly()
    two = runner(pool, later)  # the first process ended before its next sweep
    for _ in range(3):
        await two.sweep_cards()
    assert await two.schedule_weekly() == 0  # the period is marked
    period = two.period()
    assert await store.run_known(key.id, f"card:{newest}") or await store.run_known(
        key.id, f"week:{period}"
    ), "no run at all this period"


class SmallPages(ScopeStore):
    """Pages of two cards: a sweep more than a page behind without 10,000 cards."""

    async def cards_since(self, index: int, limit: int = 10_000) -> tuple[dict[str, str], int]:
        return await super().cards_since(index, 2)


async def test_the_week_does_not_leave_an_agent_to_a_card_run_already_known(pool: asyncpg.Pool) -> None:
    """(Review; older than the comparison.) A new process sweeps from a held mark, more than a page
    behind; an agent's newest card lies past its first page, and the previous process already ran that
    card. The week left the agent to the sweep, which found the run known and added nothing: no run in
    the period. A card run known already now gives the week's run."""
    key, _, store = await change_swept_past_a_held_mark(pool, WEEK0, plain=3)
    later = WEEK0 + dt.timedelta(days=7)
    config, server = ScopeRunConfig(), keys.SigningKey.generate()
    two = ScopeRunner(None, SmallPages(pool), server, ExamDirs(), config, clock=lambda: later)  # type: ignore[arg-type]
    await two.sweep_cards()  # one page: the held card and a plain one
    await two.schedule_weekly()
    for _ in range(3):
        await two.sweep_cards()
    assert await store.run_known(key.id, f"week:{two.period()}"), "no run this period"


async def log_plain_card(pool: asyncpg.Pool, key: keys.SigningKey) -> int:
    """An agent-card/v1: it declares nothing."""
    env = card_envelope(key, "plain", endpoint="https://agent.example/api")
    known = {key.id: bytes(key.public_key)}
    [appended] = await LogStore(pool).append([check(prepare(msgspec.to_builtins(env)), known.get)])
    return appended.index


async def test_the_sweep_reads_only_agents_whose_newest_card_can_declare(pool: asyncpg.Pool) -> None:
    """An agent whose newest card is a v1 card gets no run (it declares nothing), so the sweep does not
    read its cards; one whose newest card is a v2 card with declarations gets its run, as before."""
    plain, dropped, upgraded = (keys.SigningKey.generate() for _ in range(3))
    await log_plain_card(pool, plain)
    await log_card(pool, dropped, "m1")
    await log_plain_card(pool, dropped)  # back to a v1 card: nothing declared any more
    await log_plain_card(pool, upgraded)
    newest = await log_card(pool, upgraded, "m1")
    store = CountingStore(pool)
    store.looked_up = []
    sweeper = ScopeRunner(None, store, keys.SigningKey.generate(), ExamDirs(), ScopeRunConfig())  # type: ignore[arg-type]
    assert await sweeper.sweep_cards() == 1
    assert store.looked_up == [[upgraded.id], [upgraded.id]]  # its newest card, and the one swept before
    assert await store.run_known(upgraded.id, f"card:{newest}")
    assert not await store.run_known(dropped.id, f"card:{newest - 2}")
    assert await store.mark("scope_cards") == newest + 1


async def test_a_card_not_swept_yet_gets_its_own_run_not_the_weeks(pool: asyncpg.Pool) -> None:
    """A card logged between a step's sweep and its weekly scheduling used to get the week's run first,
    which then held its declarations run back (one pending run per agent; found as a flaky service test).
    The week gives it the card's own run instead (the sweep then finds it known). An agent whose unswept
    new card declares nothing new still gets the week's run."""
    steady = keys.SigningKey.generate()
    swept = await log_card(pool, steady, "m1")
    one = runner(pool)
    assert await one.sweep_cards() == 1
    await ScopeStore(pool).finish_run(steady.id, f"card:{swept}", attempt=0, entry_index=None, reason="done")
    fresh = keys.SigningKey.generate()
    first = await log_card(pool, fresh, "m1")  # after the sweep, before the week's scheduling
    await log_card(pool, steady, "m1")  # the same declarations again: no run of its own
    assert await one.schedule_weekly() == 2  # the steady agent's week; the fresh agent's card run
    store = ScopeStore(pool)
    assert await store.run_known(steady.id, f"week:{one.period()}")
    assert not await store.run_known(fresh.id, f"week:{one.period()}")
    assert await store.run_known(fresh.id, f"card:{first}")
    assert await one.sweep_cards() == 0


async def test_when_the_queue_is_full_the_agents_left_for_the_next_week_change_every_week(
    pool: asyncpg.Pool,
) -> None:
    """(A limit found in session 9, fixed here.) With more agents than the queue holds, the weekly runs
    that do not fit wait for the next period. Taken in order of agent id, the same agents never fitted,
    week after week, and an agent could grind a key whose id sorts last; taken in each period's own
    order (a hash of the server's signature over the period and the agent's id), those left out are
    drawn afresh each period."""
    agents = [keys.SigningKey.from_seed(bytes([i]) * 32) for i in range(6)]
    for key in agents:
        await log_card(pool, key, "m1")
    store, server = ScopeStore(pool), keys.SigningKey.from_seed(b"v" * 32)
    start = dt.datetime(2031, 3, 3, 12, tzinfo=dt.UTC)
    asked: set[str] = set()
    by_id_last = sorted(k.id for k in agents)[2:]  # an order by id refused these every week
    for week in range(4):
        at = start + dt.timedelta(days=7 * week)
        weekly = runner(pool, at, ScopeRunConfig(max_pending=2), server)  # any process: the server's key
        assert await weekly.schedule_weekly() == 2  # the queue holds two
        period = weekly.period()
        salt = week_salt(server, period)
        order = sorted((k.id for k in agents), key=lambda agent: week_turn(salt, agent))
        pending = {
            r["agent"] for r in await pool.fetch("SELECT agent FROM scope_runs WHERE state = 'pending'")
        }
        assert pending == set(order[:2])  # the period's first two
        asked |= pending
        for agent in pending:  # carried out before the next week
            await store.finish_run(agent, f"week:{period}", attempt=0, entry_index=None, reason="done")
    assert asked >= set(by_id_last[:2]) and len(asked) >= 5
