"""Server scope-honesty runs: the server sits a fresh ``scope@1`` instance against each agent's declared
endpoint, weekly and after every declaration change, and logs a ``scope-run/v1`` (docs/scope-honesty.md,
"Server runs").

Modelled on re-verification (services/reverify.py): durable rows (``scope_runs``, one per agent and
run key, at most one pending per agent) scheduled by a sweep, drained by a worker that asks the endpoint
through the outbound guard (bounded time and size), grades with the published graders and appends one
statement signed by the re-verification key. The statement's nonce is derived from (agent, run key), so
a retry after a crash, a restart or a second process finds the entry instead of logging it twice.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import hashlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Literal

import msgspec
from prometheus_client import Counter

from trustscore import canonical
from trustscore.errors import NonceReplay, TrustscoreError
from trustscore.exams.forms import instantiate, items_digest, scope_form, sitting_exam
from trustscore.exams.loader import ExamDirs, load_exam
from trustscore.exams.model import ExamSet
from trustscore.grading import Item, grade_item
from trustscore.kinds.cards import DECLARING_PREDICATE_TYPES, AgentCard, declarations_digest, declarations_of
from trustscore.kinds.graded import GradedItem
from trustscore.kinds.scope_run import (
    MAX_ERROR,
    SCOPE_EXAM,
    ScopeAnswer,
    ScopeRun,
    Trigger,
    answer_digest,
    make_scope_run,
    run_nonce,
    seed_message,
    sitting_seed,
)
from trustscore.ledger import audit, dsse, statements
from trustscore.ledger.keys import SigningKey
from trustscore.ledger.submission import prepare
from trustscore.outbound.guard import OutboundFailed, OutboundPolicy, OutboundRefused, check_url, safe_client
from trustscore.outbound.reverify_runner import GuardedHttpAgent, _Asker
from trustscore.scope.runs import skip_reason
from trustscore.services.log import LogService
from trustscore.services.periodic import Periodic, claim_hold, describe, settle_failed_run, still_held
from trustscore.store.scope import ScopeStore

log = logging.getLogger(__name__)


FIRST_MONDAY = dt.datetime(1970, 1, 5, tzinfo=dt.UTC)
# of an attempt to schedule a run ("limited": a declarations run the agent had one of too recently)
Outcome = Literal["added", "known", "refused", "limited"]
RETRIES_PER_SWEEP = 1_000  # refused declarations runs tried again per sweep, oldest first
MAX_REFUSED = 10_000  # refused runs held for retry before the sweep stops reading new cards


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


#: The background job's name (its failed steps and failed runs are counted under it).
TASK = "scope runs"


@dataclass(frozen=True)
class ScopeRunConfig:
    interval: float = 604_800.0  # seconds between scheduled runs of each agent (weekly)
    deadline_s: float = 600.0  # a whole run
    poll: float = 1.0  # seconds between sweeps of new cards and pending runs
    max_pending: int = 10_000  # the queue's bound (a run over it waits for the next period)
    max_attempts: int = 3
    retry_s: float = 60.0  # a failed run is due again after this, four times longer per attempt
    policy: OutboundPolicy = field(default_factory=OutboundPolicy)
    # At most one declarations-triggered run per agent per this many seconds (0: no limit). The view
    # shows the latest run of the declarations in force, and a card with another model version gives
    # a fresh draw: unbounded, an agent changed its card until a draw went well (review, 2026-12-07).
    card_interval: float = 0.0

    @property
    def hold(self) -> float:
        """Seconds a claimed run is its claimer's alone (store/scope.py, ``ScopeStore.claim_run``): see
        :func:`~trustscore.services.periodic.claim_hold`."""
        return claim_hold(self.deadline_s)


def _error(text: str | None) -> str | None:
    if text is None:
        return None
    clean = "".join(c if c.isprintable() else " " for c in text).strip() or "failed"
    return clean[:MAX_ERROR]


def ask_items(
    exam: ExamSet, items: list[Item], endpoint: str, policy: OutboundPolicy, deadline_s: float
) -> list[tuple[GradedItem, ScopeAnswer]]:
    """Ask ``endpoint`` every item through the outbound guard and grade the answers; never raises for
    anything the endpoint does (no answer is a failure with its reason). Blocking: run it in a thread."""
    out = []
    with safe_client(policy) as client:
        asker = _Asker(GuardedHttpAgent(endpoint, policy, client), time.monotonic() + deadline_s)
        for item in items:
            response = asker.ask(exam, item)
            grade = grade_item(item, response) if response.turns else None
            graded = GradedItem(
                item_id=item.id,
                dimension=item.dimension,
                grader=item.grader,
                value_millis=0 if grade is None else grade.value,
                result="failure" if grade is None else grade.result,
            )
            answer = ScopeAnswer(
                item_id=item.id,
                sha256=answer_digest([t.output for t in response.turns]) if response.turns else None,
                error=_error(response.error) or (None if response.turns else "no answer"),
            )
            out.append((graded, answer))
    return out


def _card(leaf: bytes) -> AgentCard | None:
    p = audit.parse_leaf(leaf).statement.predicate
    return p if isinstance(p, AgentCard) else None


def _first(cards: list[tuple[int, bytes]] | None) -> tuple[int, bytes] | None:
    return cards[0] if cards else None


def week_salt(key: SigningKey, period: int) -> bytes:
    """The secret of ``period``'s scheduling order: the server's (deterministic Ed25519) signature over
    the period, the same in every process holding its key, unknown to agents until the period comes."""
    return key.sign(f"scope-week:{period}".encode())


def week_turn(salt: bytes, agent: str) -> bytes:
    """``agent``'s place in the order a period's weekly runs are scheduled in: a hash of the period's
    :func:`week_salt` and the agent's id. When the queue's bound (``max_pending``) refuses the period's
    last agents, which agents they are is drawn afresh each period and cannot be foreseen. Sorted by id,
    the same agents were refused every period, and a key can be ground until its id sorts last; an
    unkeyed hash of the period could be ground too, for as many future periods as an agent likes."""
    return hashlib.sha256(salt + agent.encode()).digest()


def _declares_anew(cards: list[tuple[int, bytes]], passed: tuple[int, bytes] | None) -> bool:
    """Whether an agent's newest card gets a run of its own: it declares capabilities and an endpoint,
    and it declares otherwise than the card just before it or than ``passed``, the agent's newest card
    below the swept page (None for either: there is none).

    Both comparisons, because each alone misses a change: against the card before it only, a change
    logged and then logged again (another name, a card re-issued) in one page, or while a restart sent
    the sweep back to its mark, was compared with itself; against the passed card only, a change and a
    return to the passed declarations in one page looked like no change (the weekly scheduling had
    skipped the agent for the change's run), as did a change from a card swept after a held mark.
    ``cards``: the newest first, with the one before it if any."""
    card = _card(cards[0][1])
    if card is None or skip_reason(card) is not None:
        return False
    olds = [cards[1] if len(cards) > 1 else None, passed]
    digest = declarations_digest(card)
    return any(old is None or _digest(old[1]) != digest for old in olds)


def _digest(leaf: bytes) -> str | None:
    card = _card(leaf)
    return None if card is None else declarations_digest(card)


class ScopeRunner:
    def __init__(
        self,
        log_service: LogService,
        store: ScopeStore,
        key: SigningKey,
        exam_dirs: ExamDirs,
        config: ScopeRunConfig,
        clock: Callable[[], dt.datetime] = _now,
        failures: Counter | None = None,  # failed runs, as the background jobs' failed steps
        leased: Callable[[], Awaitable[bool]] | None = None,
    ) -> None:
        """``leased`` says whether this process still holds the job's lease (default: the lease of the
        periodic task running the step, ``periodic.still_held``): asked before each run after a step's
        first, so that a process that lost the lease part-way through a step stops claiming runs (the
        process that took the job over carries them out)."""
        self.log = log_service
        self.store = store
        self.key = key
        self.exam_dirs = exam_dirs
        self.config = config
        self.clock = clock
        self.failures = failures
        self.leased = leased or still_held
        self._period: int | None = None  # the last period the weekly runs were scheduled for
        self._cards_from: int | None = None  # where this process's sweep of cards goes on (None: the mark)
        self._marked: int | None = None  # the mark this process last wrote
        self._refused: dict[int, str] = {}  # card index -> agent: its declarations run was refused for now

    def period(self) -> int:
        """The number of scope intervals since Monday 1970-01-05 UTC at the clock's time (the weekly run
        key; with the default interval, the weeks TC and the escalation chain read)."""
        return int((self.clock() - FIRST_MONDAY).total_seconds() // self.config.interval)

    async def sweep_cards(self) -> int:
        """A run soon after every newest card whose declarations or declared model version differ from
        the agent's previous card (its first card with declarations included), up to 10,000 cards of each
        kind at a time.

        Goes on from where this process's last sweep stopped; a new process (a restart, a lease takeover)
        from the mark in the database. A card whose run is refused for now (its agent has a run pending,
        or too many runs wait) is retried at each sweep, and the mark stays at the oldest such card, so a
        new process sweeps from there once. A crash before the mark moves repeats a page; runs are keyed
        by card, so nothing runs twice."""
        scheduled = 0
        for index, agent in sorted(self._refused.items())[:RETRIES_PER_SWEEP]:
            outcome = await self._schedule(agent, f"card:{index}", "declarations")
            if outcome != "refused":
                del self._refused[index]
                scheduled += outcome == "added"
        if len(self._refused) >= MAX_REFUSED:  # saturated: no new page until the backlog drains
            return scheduled
        start = await self.store.mark("scope_cards") if self._cards_from is None else self._cards_from
        newest, upto = await self.store.cards_since(start)
        # An agent whose newest card here cannot declare capabilities (a v1 card) gets no run: not read.
        # A newer card of it past this page is swept with the next page.
        agents = sorted(agent for agent, kind in newest.items() if kind in DECLARING_PREDICATE_TYPES)
        found = await self.store.newest_cards(agents, await self.store.log_size()) if agents else {}
        passed = await self.store.newest_cards(agents, start, 1) if agents else {}
        for agent, cards in sorted(found.items()):
            if _declares_anew(cards, _first(passed.get(agent))):
                index = cards[0][0]
                outcome = await self._schedule(agent, f"card:{index}", "declarations")
                scheduled += outcome == "added"
                if outcome == "refused":
                    self._refused[index] = agent
        self._cards_from = upto
        mark = min([upto, *self._refused])
        if mark != self._marked:  # no write per poll while nothing arrives
            await self.store.advance("scope_cards", mark)
            self._marked = mark
        return scheduled

    async def schedule_weekly(self) -> int:
        """Once per period: a run for every agent that declares capabilities and an endpoint. Once per
        period across restarts and lease takeovers too: the start of the last period scheduled is kept in
        the database (after a crash part-way the period is scheduled again; runs are keyed by period).
        Only that exact period is skipped: a mark set by a clock ahead of this one, or under another
        interval, does not silence this process. A run refused (its agent had one pending, which reads
        the newest card anyway, or 10,000 waited) waits for the next period, as it did before the mark.
        Agents are taken in the period's own order (:func:`week_turn`), so those the bound refuses are
        drawn afresh each period."""
        period = self.period()
        if period == self._period:
            return 0
        start = int((FIRST_MONDAY + dt.timedelta(seconds=period * self.config.interval)).timestamp())
        if start == await self.store.mark("scope_period"):
            self._period = period
            return 0
        scheduled = 0
        swept = self._cards_from
        newest = await self.store.newest_cards(None, count=1)
        unswept = sorted(a for a, cards in newest.items() if swept is not None and cards[0][0] >= swept)
        two = await self.store.newest_cards(unswept, None, 2) if unswept else {}
        passed = await self.store.newest_cards(unswept, swept, 1) if unswept else {}
        for agent in sorted(newest, key=functools.partial(week_turn, week_salt(self.key, period))):
            cards = two.get(agent) or newest[agent]
            if skip_reason(_card(cards[0][1])) is not None:
                continue
            if agent in two and _declares_anew(cards, _first(passed.get(agent))):
                # A card this process has not swept yet that the sweep's rule gives a run of its own: that
                # run, not the week's, is the agent's (one pending run per agent: whichever came first
                # would have held the other back). Scheduled here, not left to the next sweep: a restart
                # or another process sweeps from another position and may decide otherwise (review), and
                # the period is marked done for every process. A card run known already gives the week's.
                outcome = await self._schedule(agent, f"card:{cards[0][0]}", "declarations")
                if outcome in ("added", "refused"):  # (known or limited: the week's run reads it)
                    scheduled += outcome == "added"
                    continue
            scheduled += await self._schedule(agent, f"week:{period}", "schedule") == "added"
        await self.store.set_mark("scope_period", start)
        self._period = period
        return scheduled

    async def _schedule(self, agent: str, run_key: str, trigger: Trigger) -> Outcome:
        if (
            trigger == "declarations"
            and self.config.card_interval > 0
            # (the period and a run's deadline: two card runs never count in one week, as sittings)
            and await self.store.recent_run(
                agent, trigger, self.config.card_interval + self.config.deadline_s
            )
        ):
            log.info("scope run %s of %s not scheduled: a declarations run came within %g s", run_key,
                     agent, self.config.card_interval)  # fmt: skip
            return "limited"
        if await self.store.schedule_run(agent, run_key, trigger, self.config.max_pending):
            log.info("scope run %s of %s scheduled (%s)", run_key, agent, trigger)
            return "added"
        return "known" if await self.store.run_known(agent, run_key) else "refused"

    async def work_once(self) -> bool:
        """Carry out one pending run; False when there is none."""
        claimed = await self.store.claim_run(self.config.hold)
        if claimed is None:
            return False
        agent, run_key, trigger, attempt = claimed
        if attempt > self.config.max_attempts:
            # Claimed that often and never finished: its process ended during each attempt (the run
            # crashed it, or it was killed from outside: a kill uses up an attempt too).
            if self.failures is not None:
                self.failures.labels(task=TASK).inc()
            await self._close(agent, run_key, attempt, "never finished")
            log.warning(
                "scope run %s of %s closed: claimed %d times, never finished", run_key, agent, attempt
            )
            return True
        try:
            await self._carry_out(agent, run_key, trigger, attempt)  # type: ignore[arg-type]
        except Exception as exc:  # a refusal, a bug, the database or the network away: an attempt
            if self.failures is not None:
                self.failures.labels(task=TASK).inc()
            # public: an unexpected exception's message stays in the server's log
            reason = (
                exc.message if isinstance(exc, TrustscoreError) else f"internal error ({type(exc).__name__})"
            )
            done = await settle_failed_run(
                attempt,
                self.config.max_attempts,
                self.config.retry_s,
                lambda: self._close(agent, run_key, attempt, reason[:MAX_ERROR]),
                lambda delay: self.store.retry_later(agent, run_key, delay, attempt=attempt),
            )
            log.warning("scope run %s of %s failed (%s); %s", run_key, agent, describe(exc), done)
        return True

    async def _close(self, agent: str, run_key: str, attempt: int, reason: str | None) -> bool:
        """Close a run without logging an entry (after its last attempt, or skipped): done with its entry
        if an earlier attempt logged one before it failed or its process ended (the run's nonce finds it),
        else skipped with ``reason``."""
        logged = await self.store.entry_by_nonce(self.key.id, run_nonce(agent, run_key))
        return await self._finish(
            agent, run_key, attempt, entry_index=logged, reason=None if logged is not None else reason
        )

    async def _finish(
        self, agent: str, run_key: str, attempt: int, *, entry_index: int | None, reason: str | None
    ) -> bool:
        """Close the run claimed as ``attempt``; a claim overtaken after its hold changes nothing (the
        later claim's outcome stands), says so in the log and returns False."""
        if await self.store.finish_run(
            agent, run_key, attempt=attempt, entry_index=entry_index, reason=reason
        ):
            return True
        log.info("scope run %s of %s: attempt %d was overtaken by a later claim", run_key, agent, attempt)
        return False

    async def _carry_out(self, agent: str, run_key: str, trigger: Trigger, attempt: int) -> None:
        cards = (await self.store.newest_cards([agent], count=1)).get(agent)
        card_index, card = (cards[0][0], _card(cards[0][1])) if cards else (0, None)
        reason = skip_reason(card)
        if reason is None and card is not None and card.endpoint:
            try:
                await asyncio.to_thread(check_url, card.endpoint, self.config.policy)
            except OutboundRefused as exc:
                reason = f"endpoint refused by the server's outbound policy: {exc.message}"
            except OutboundFailed:
                pass  # unreachable is the agent's failure: asked, and recorded as such
        if reason is not None or card is None or not card.endpoint:
            log.info("scope run %s of %s skipped: %s", run_key, agent, reason)
            await self._close(agent, run_key, attempt, reason)
            return
        decls, non = declarations_of(card)
        form = scope_form(decls, non)
        digest = declarations_digest(card)
        signature = self.key.sign(seed_message(agent, run_key, digest))
        items = instantiate(form, sitting_seed(signature))
        exam = sitting_exam(load_exam(SCOPE_EXAM, self.exam_dirs), items)
        results = await asyncio.to_thread(
            ask_items, exam, items, card.endpoint, self.config.policy, self.config.deadline_s
        )
        run = ScopeRun(
            nonce=run_nonce(agent, run_key),
            issued_at=statements.format_time(self.clock()),
            verifier=self.key.id,
            agent=agent,
            trigger=trigger,
            run_key=run_key,
            card_index=card_index,
            declarations_digest=digest,
            model_version=card.model_version,
            endpoint=card.endpoint,
            exam=SCOPE_EXAM,
            form=form,
            seed_signature=canonical.b64encode(signature),
            items_digest=items_digest(items),
            answers=[a for _, a in results],
            items=[g for g, _ in results],
            ran_at=statements.format_time(self.clock()),
        )
        envelope = dsse.sign(make_scope_run(run), [self.key])
        try:
            [appended] = await self.log.append([prepare(msgspec.to_builtins(envelope))], batch=False)
            index = appended.index
        except NonceReplay:  # logged before a crash or by another process: the nonce is the run's key
            found = await self.store.entry_by_nonce(self.key.id, run.nonce)
            if found is None:
                raise
            index = found
        log.info("scope run %s of %s logged at %d", run_key, agent, index)
        await self._finish(agent, run_key, attempt, entry_index=index, reason=None)

    async def step(self, stop: asyncio.Event) -> None:
        """Schedule (new cards, a new period), then carry out pending runs until none is left, ``stop``, or
        this process no longer holds the job's lease (``leased``: asked before each run after the first)."""
        await self.sweep_cards()
        await self.schedule_weekly()
        while not stop.is_set() and await self.work_once() and await self.leased():
            pass

    def periodic(self, stop: asyncio.Event) -> Periodic:
        return Periodic(TASK, lambda: self.step(stop), self.config.poll)
