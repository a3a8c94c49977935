"""Server re-verification: ask agents' declared endpoints sampled items again and log what was found.

Runs are durable rows (``reverify_runs``) derived from the log: a sweep schedules one run after every
exam report of an agent with an endpoint (seeded by the root of the tree that ends with the report's
graded evidence), a schedule adds runs on each agent's latest report, and a worker drains them. A run's
statement has a nonce derived from its id, so a retry after a crash finds the entry already logged
instead of logging it twice (docs/reverification.md).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass, field

import msgspec
from prometheus_client import Counter

from trustscore.errors import NonceReplay, NotYetAvailable, VerificationError
from trustscore.exams.loader import ExamDirs, list_exams
from trustscore.exams.reporting import exam_for
from trustscore.kinds.exam_report import EXAM_REPORT, ExamReport
from trustscore.kinds.graded import GradedEvidence
from trustscore.kinds.reverification import REVERIFICATION, Reverification, run_nonce, sampling
from trustscore.ledger import audit, dsse, merkle, statements
from trustscore.ledger.keys import SigningKey
from trustscore.ledger.submission import prepare
from trustscore.outbound.guard import OutboundPolicy
from trustscore.outbound.reverify_runner import build_statement, run_once
from trustscore.reverify import fresh, status
from trustscore.services.log import LogService
from trustscore.services.periodic import (
    Periodic,
    claim_hold,
    describe,
    period_of,
    settle_failed_run,
    still_held,
)
from trustscore.store.reverify import ReverifyStore, Run

log = logging.getLogger(__name__)


#: The background job's name (its failed steps and failed runs are counted under it).
TASK = "re-verification"
#: Agents whose re-verification statuses Reverifier.statuses() reads together.
STATUS_CHUNK = 25
#: Agents whose digest of runs (reverify/status.py ``Digest``) a Reverifier keeps, the most recently read:
#: a status then reads only the runs logged since. Each holds its last statement and newest rows (~7-10 KiB).
MAX_DIGESTS = 1024


@dataclass(frozen=True)
class ReverifyConfig:
    k: int = 10
    k_private: int = 3
    k_fresh: int = 3  # fresh generated instances per run (reverify/fresh.py)
    deadline_s: float = 120.0
    interval: float = 86_400.0  # scheduled runs on every agent's latest report; 0: only after reports
    poll: float = 0.5
    max_attempts: int = 5
    retry_s: float = 60.0  # a failed run is due again after this, four times longer per attempt
    policy: OutboundPolicy = field(default_factory=OutboundPolicy)

    @property
    def hold(self) -> float:
        """Seconds a claimed run is its claimer's alone (store/reverify.py, ``ReverifyStore.claim``): see
        :func:`~trustscore.services.periodic.claim_hold`."""
        return claim_hold(self.deadline_s)


class Reverifier:
    def __init__(
        self,
        log_service: LogService,
        store: ReverifyStore,
        key: SigningKey,
        exam_dirs: ExamDirs,
        config: ReverifyConfig,
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
        self.failures = failures
        self.leased = leased or still_held
        self._swept = 0  # reports below this index have been considered for a run
        # Each agent's digest and the leaf hash of the run it ends with; least recently read first.
        self._digests: OrderedDict[str, tuple[status.Digest, bytes]] = OrderedDict()

    async def _root(self, size: int) -> bytes:
        nodes = await self.log.store.nodes(merkle.frontier_nodes(size))
        return merkle.root_from_nodes(size, nodes)

    async def sweep(self) -> int:
        """Schedule a run for every report integrated since the last sweep whose agent has an endpoint."""
        cp = self.log.checkpoint_size or 0
        # A report's index, agent (its statement's subject) and statement hash are kept beside its leaf:
        # no leaf is read or parsed here.
        reports = [
            head
            for head in await self.log.store.heads_of_kind(EXAM_REPORT.predicate_type, cp, self._swept)
            if sampling.seed_size(head.index) <= cp
        ]
        if not reports:
            return 0
        endpoints = await self.store.endpoints({head.subject for head in reports})
        scheduled = 0
        for head in reports:
            agent, size = head.subject, sampling.seed_size(head.index)
            if agent in endpoints:
                seed = sampling.seed(await self._root(size), head.statement_hash, agent)
                scheduled += await self.store.schedule(
                    Run(agent, head.index, seed, "report", size, endpoints[agent], 0)
                )
        self._swept = reports[-1].index + 1
        return scheduled

    async def schedule_period(self, due: float) -> int:
        """The scheduled runs of the period of ``config.interval`` that ``due`` (seconds since the epoch)
        falls in: a run on each agent's latest report, seeded by the checkpoint the period's first
        scheduling found newest (migration 0023). Scheduling a period again (a retry, a restart, a
        takeover of the lease, two workers at once) derives the same seeds, so it adds only what the
        first left out: one round per agent and period. An aligned job (periodic.py); NotYetAvailable
        for a period the database's clock has not nearly reached (``ReverifyStore.period_checkpoint``),
        which the job then retries."""
        start_ms = round(period_of(self.config.interval, due) * self.config.interval * 1000)
        try:
            cp = await self.log.latest_checkpoint(fresh=True)
        except NotYetAvailable:  # nothing integrated yet: no report to re-verify
            return 0
        size = await self.store.period_checkpoint(start_ms, cp.size)
        if size is None:  # a failed step: the aligned job tries the same period again (periodic.py)
            raise NotYetAvailable(
                f"the period starting at {start_ms} ms has not begun by the database's clock: this "
                "process's clock is ahead of it"
            )
        return await self.schedule_at(size, cp.root if size == cp.size else await self._root(size))

    async def schedule_at(self, size: int, root: bytes) -> int:
        """A scheduled run on each agent's latest report in the log's first ``size`` entries, seeded by
        ``root`` (that tree's); none for an agent whose previous run is still pending (the schedule runs
        beside the worker, so runs slower than the interval would otherwise pile up without bound and
        starve the runs that new reports bring), nor for one with a report after those entries."""
        # New reports get their own run first: a scheduled run seeded by the same checkpoint would have the
        # same (agent, report, seed) and take the report run's place.
        await self.sweep()
        endpoints = await self.store.endpoints(None)
        busy = await self.store.pending_agents()
        # One row per agent, from the columns kept beside the leaves (every report's leaf used to be read
        # and parsed here, every period, and held in memory at once).
        latest = {
            head.subject: (head.index, head.statement_hash)
            for head in await self.log.store.latest_heads_of_kind(EXAM_REPORT.predicate_type, size - 1)
        }
        # An agent that reported again after the checkpoint has its new report re-verified by that
        # report's own run: a run on the report before it (the latest up to ``size``, when a period is
        # scheduled again later in the period) would hold the endpoint to answers the agent has replaced.
        busy |= await self.store.reporting_since(size - 1)
        scheduled = 0
        for agent, (index, digest) in sorted(latest.items()):
            if agent in endpoints and agent not in busy:
                seed = sampling.seed(root, digest, agent)
                scheduled += await self.store.schedule(
                    Run(agent, index, seed, "schedule", size, endpoints[agent], 0)
                )
        return scheduled

    async def digests(self, agents: Collection[str]) -> dict[str, status.Digest]:
        """The :class:`~trustscore.reverify.status.Digest` of each of ``agents``' runs, in one query that
        reads only the runs logged after each kept digest (an agent not kept: all of its runs, once).

        A kept digest is used only while the log still holds the run it ends with, the same entry (its
        leaf hash): after a restore of the database to an earlier state, or a failover to a standby that
        lost commits, the agent's runs are read whole again instead of missing what is logged anew at the
        indexes it had read."""
        base = {agent: self._digests.get(agent) for agent in agents}
        after = {agent: -1 if kept is None else kept[0].last_index for agent, kept in base.items()}
        later = await self.store.leaves_after(REVERIFICATION.predicate_type, after)
        rewound = [
            agent
            for agent, kept in base.items()
            if kept is not None
            and kept[0].last_index >= 0  # a digest of no run ends with no entry
            and later.get(agent, [(-1, b"", None)])[0][:2] != (kept[0].last_index, kept[1])
        ]
        if rewound:
            again = await self.store.leaves_after(REVERIFICATION.predicate_type, dict.fromkeys(rewound, -1))
            for agent in rewound:
                base[agent], later[agent] = None, again.get(agent, [])
        out = {}
        for agent, kept in base.items():
            digest, last_hash = (status.Digest(), b"") if kept is None else kept
            runs = []
            for index, leaf_hash, leaf in later.get(agent, []):
                if leaf is None:  # the run the kept digest ends with (checked above)
                    continue
                p = audit.parse_leaf(leaf).statement.predicate
                assert isinstance(p, Reverification)
                runs.append((index, p))
                last_hash = leaf_hash
            # Folded on the digest the query was asked from (another read may have kept a newer one since).
            out[agent] = status.fold(digest, runs)
            now_kept = self._digests.get(agent)
            if agent in rewound or now_kept is None or now_kept[0].last_index <= out[agent].last_index:
                self._digests[agent] = (out[agent], last_hash)
            self._digests.move_to_end(agent)
        while len(self._digests) > MAX_DIGESTS:
            self._digests.popitem(last=False)
        return out

    async def statuses(self, agents: Sequence[str]) -> dict[str, status.VerificationStatus]:
        """:meth:`status` of each of ``agents``, two queries for each :data:`STATUS_CHUNK` of them (a page
        of a leaderboard read two per agent: 400 round trips for its 200 rows)."""
        out = {}
        unique = list(dict.fromkeys(agents))
        for start in range(0, len(unique), STATUS_CHUNK):
            chunk = unique[start : start + STATUS_CHUNK]
            endpoints = await self.store.endpoints(set(chunk))
            digests = await self.digests(chunk)
            now = dt.datetime.now(dt.UTC)
            for agent in chunk:
                out[agent] = status.status_of(
                    digests[agent], endpoint=endpoints.get(agent), now=now, interval_s=self.config.interval
                )
        return out

    async def status(self, agent: str) -> status.VerificationStatus:
        """Verified now: an endpoint in the current card and a recent, matching run (reverify/status.py)."""
        return (await self.statuses([agent]))[agent]

    async def work_once(self) -> bool:
        """Carry out one pending run; False when there is none."""
        run = await self.store.claim(self.config.hold)
        if run is None:
            return False
        if run.attempts > self.config.max_attempts:
            # Claimed that often and never finished: its process ended during each attempt (the run
            # crashed it, or it was killed from outside: a kill uses up an attempt too).
            if self.failures is not None:
                self.failures.labels(task=TASK).inc()
            await self._close(run)
            log.warning("re-verification of %s report %d closed: claimed %d times, never finished",
                        run.agent, run.report_index, run.attempts)  # fmt: skip
            return True
        try:
            await self._carry_out(run)
        except Exception as exc:  # a refusal, a bug, the database or the network away: an attempt
            if self.failures is not None:
                self.failures.labels(task=TASK).inc()
            done = await settle_failed_run(
                run.attempts,
                self.config.max_attempts,
                self.config.retry_s,
                lambda: self._close(run),
                lambda delay: self.store.retry_later(run, delay),
            )
            log.warning("re-verification of %s report %d failed (%s); %s",
                        run.agent, run.report_index, describe(exc), done)  # fmt: skip
        return True

    async def _close(self, run: Run) -> bool:
        """Close a run after its last attempt, with its entry if an attempt logged one before it failed or
        its process ended (the run's nonce finds it)."""
        logged = await self.store.entry_by_nonce(
            self.key.id, run_nonce(run.agent, run.report_index, run.seed)
        )
        return await self._finish(run, entry_index=logged, same_as_index=None)

    async def _finish(self, run: Run, *, entry_index: int | None, same_as_index: int | None) -> bool:
        """Close ``run``; a claim overtaken after its hold changes nothing (the later claim's outcome
        stands), says so in the log and returns False."""
        if await self.store.finish(run, entry_index=entry_index, same_as_index=same_as_index):
            return True
        log.info("re-verification of %s report %d: attempt %d was overtaken by a later claim",
                 run.agent, run.report_index, run.attempts)  # fmt: skip
        return False

    async def _carry_out(self, run: Run) -> None:
        report_leaf = await self.store.leaf(run.report_index)
        graded_leaf = await self.store.leaf(run.report_index + 1)
        if report_leaf is None or graded_leaf is None:
            raise VerificationError(f"report {run.report_index} or its graded evidence is missing")
        prepared = audit.parse_leaf(report_leaf)
        report = prepared.statement.predicate
        graded = audit.parse_leaf(graded_leaf).statement.predicate
        if not isinstance(report, ExamReport) or not isinstance(graded, GradedEvidence):
            raise VerificationError(
                f"entry {run.report_index} is not a report followed by its graded evidence"
            )
        exam = exam_for(report, self.exam_dirs)
        private = [e for e in list_exams(self.exam_dirs) if e.file.tier == "private"]
        root = await self._root(run.checkpoint_size)
        if sampling.seed(root, prepared.statement_hash, run.agent) != run.seed:
            raise VerificationError("the run's seed does not match its checkpoint")
        result = await asyncio.to_thread(
            run_once,
            report,
            exam,
            graded.items,
            run.endpoint,
            self.config.policy,
            run.seed,
            min(self.config.k, len(report.items)),
            private,
            self.config.k_private,
            deadline_s=self.config.deadline_s,
            fresh_items=fresh.plan(exam.id, run.seed, self.config.k_fresh, self.key.sign),
        )
        # The agent's last run (its security state and the identical-result check need no more), read
        # alone: not through the kept digests, which a period's runs over every agent would churn.
        last = await self.store.last_of(REVERIFICATION.predicate_type, run.agent)
        before: Reverification | None = None
        if last is not None:
            p = audit.parse_leaf(last[1]).statement.predicate
            assert isinstance(p, Reverification)
            before = p
        payload = build_statement(
            result,
            verifier=self.key.id,
            report=report,
            report_index=run.report_index,
            report_sha256=prepared.statement_hash,
            endpoint=run.endpoint,
            trigger=run.trigger,  # type: ignore[arg-type]
            checkpoint_size=run.checkpoint_size,
            checkpoint_root=root,
            history=[] if before is None else [before],  # the security state after it is the last run's
            ran_at=statements.format_time(dt.datetime.now(dt.UTC)),
        )
        new = statements.parse_statement(payload).predicate
        assert isinstance(new, Reverification)
        if before is not None and not status.should_record(before, new):
            assert last is not None  # before is its statement
            await self._finish(run, entry_index=None, same_as_index=last[0])
            return
        envelope = dsse.sign(payload, [self.key])
        try:
            [appended] = await self.log.append([prepare(msgspec.to_builtins(envelope))], batch=False)
            index = appended.index
        except NonceReplay:  # logged before a crash: the run's nonce is its idempotency key
            found = await self.store.entry_by_nonce(self.key.id, new.nonce)
            if found is None:
                raise
            index = found
        await self._finish(run, entry_index=index, same_as_index=None)

    async def sweep_and_work(self, stop: asyncio.Event) -> None:
        """Schedule runs after new reports and carry out pending runs until none is left, ``stop``, or this
        process no longer holds the job's lease (``leased``).

        The sweep comes before every run, not once: the schedule (its own periodic task) may add runs
        faster than slow endpoints let them finish, and a report's own run must not wait behind them all.
        """
        while not stop.is_set():
            await self.sweep()
            if not await self.work_once() or not await self.leased():
                return

    def periodic(self, stop: asyncio.Event) -> list[Periodic]:
        """The background work: sweep and drain every ``poll`` seconds; a scheduled run on every agent's
        latest report once per period of ``interval`` seconds (none when it is 0), aligned on the clock
        (periodic.py) so that whichever process holds the lease, each period gets its round once."""
        tasks = [Periodic(TASK, lambda: self.sweep_and_work(stop), self.config.poll)]
        if self.config.interval > 0:
            tasks.append(
                Periodic("re-verification schedule", self.schedule_period, self.config.interval, aligned=True)
            )
        return tasks
