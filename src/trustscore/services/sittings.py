"""Fresh exam sittings: open (commit to a secret), play dialogues, report (grade and reveal), expire.

Protocol (docs/exams.md, "Sittings"): the agent's signed ``sitting-request`` is logged followed, in the
same transaction, by the server's ``sitting-open`` committing to SHA-256(secret). The seed is
H(secret ‖ root of the log right after the sitting-open ‖ request hash); the agent receives the prompts
only. Its ``sitting-report`` is logged followed by the server's ``sitting-close``: the secret, the root,
the digest of the regenerated items and the grades. A sitting not reported by its deadline is closed by
:meth:`SittingService.sweep` with every item a failure. Each server statement's nonce is derived from
the sitting, so the log itself refuses a second open of one request or a second close of one sitting.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import hmac
import logging
import math
import secrets
from dataclasses import dataclass

import msgspec

from trustscore.errors import Conflict, InvalidInput, NonceReplay, NotFound, RateLimited, SignatureError
from trustscore.exams.forms import (
    commitment,
    form_for,
    instantiate,
    items_digest,
    new_secret,
    scope_form,
    sitting_seed,
)
from trustscore.exams.loader import ExamDirs, load_exam
from trustscore.exams.sitting_grading import expired_grades, grade_sitting
from trustscore.grading import ItemGrade, get_grader
from trustscore.grading.model import Item
from trustscore.kinds.cards import AgentCard, declarations_of
from trustscore.kinds.graded import GradedItem
from trustscore.kinds.scope_run import SCOPE_EXAM
from trustscore.kinds.sittings import (
    FormPart,
    SittingClose,
    SittingOpen,
    SittingReport,
    SittingRequest,
    make_close,
    make_open,
)
from trustscore.ledger import audit, dsse, merkle, statements
from trustscore.ledger.keys import SigningKey
from trustscore.ledger.submission import Prepared, prepare
from trustscore.services.log import LogService
from trustscore.store.log import Appended, index_by_nonce
from trustscore.store.scope import ScopeStore
from trustscore.store.sittings import SittingRow, SittingStore

log = logging.getLogger(__name__)
MAX_DIALOGUE_TURNS = 64
MAX_MOVE_CHARS = 2048
#: Bytes of a POSTed dialogue move: 64 moves of 2,048 characters, each escaped in JSON at most 12 bytes
#: (a surrogate pair of \uXXXX escapes), are ~1.57 MB.
MAX_DIALOGUE_BYTES = 2 * 1024 * 1024
#: The scope-honesty exams' references (``scope@1``): sat at most once a period by the agent itself.
SCOPE_PREFIX = "scope@"


@dataclass(frozen=True)
class SittingConfig:
    deadline_s: float = 3600.0  # seconds from open to the deadline
    max_unsettled: int = 4  # sittings an agent may hold open at once
    sweep_interval: float = 5.0  # seconds between sweeps (expire overdue sittings, repair crashed opens)
    clock_skew: float = 300.0
    # At most one agent-started scope@1 sitting per agent per this many seconds (0: no limit). The view
    # shows the latest run, so unbounded retries let an agent stop after a lucky one (docs/scope-honesty.md).
    scope_interval_s: float = 604_800.0


class PublicItem(msgspec.Struct, frozen=True):
    """What the agent sees of an item: never the grader's arguments."""

    id: str
    dimension: str
    grader: str
    kind: str
    prompts: list[str]
    times: int
    timeout_ms: int


@dataclass(frozen=True)
class Opened:
    sitting: int
    request_index: int
    exam: str
    deadline: str
    instructions: str
    items: list[PublicItem]
    token: str


@dataclass(frozen=True)
class Closed:
    sitting: int
    report_index: int
    close_index: int
    grades: list[ItemGrade]


def _graded(g: ItemGrade) -> GradedItem:
    return GradedItem(
        item_id=g.item_id,
        dimension=g.dimension,
        grader=g.grader,
        value_millis=g.grade.value,
        result=g.grade.result,
    )


def _nonce(prefix: str, text: str) -> str:
    return f"{prefix}-{text}"


def _close_nonce(open_index: int) -> str:
    """The nonce of the close of the sitting opened at ``open_index``: one close per sitting."""
    return _nonce("sitting-close", f"{open_index:012d}")


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class SittingService:
    def __init__(
        self, log_service: LogService, store: SittingStore, key: SigningKey, exam_dirs: ExamDirs,
        config: SittingConfig,
    ) -> None:  # fmt: skip
        self.log = log_service
        self.store = store
        self.key = key
        self.exam_dirs = exam_dirs
        self.config = config
        self._grading = asyncio.Semaphore(2)

    # --- opening -----------------------------------------------------------------------------------------

    async def open(self, body: bytes) -> Opened:
        [prepared] = self.log.parse_body(body, kinds={"sitting-request"}, single=True)
        req = prepared.statement.predicate
        assert isinstance(req, SittingRequest)
        checked = await self.log.check_prepared([prepared], batch=False)
        self._claimed(req.issued_at)
        if await self.log.store.nonce_used(req.agent, req.nonce):
            raise NonceReplay(f"nonce {req.nonce!r} of {req.agent} was already used")
        form = await self._form_at_open(req.agent, req.exam)
        base = load_exam(req.exam, self.exam_dirs)
        await self._scope_once_a_period(req.agent, req.exam)
        if await self.store.unsettled(req.agent) >= self.config.max_unsettled:
            raise self._too_many_open(req.agent)
        secret, token = new_secret(), secrets.token_bytes(32)
        request_hash = prepared.statement_hash
        deadline = _now() + dt.timedelta(seconds=self.config.deadline_s)
        scope = self.config.scope_interval_s > 0 and req.exam.startswith(SCOPE_PREFIX)
        refused = await self.store.insert(
            request_hash, req.agent, req.exam, secret, hashlib.sha256(token).digest(), deadline,
            max_unsettled=self.config.max_unsettled,
            period=(SCOPE_PREFIX, self._scope_spacing()) if scope else None,
        )  # fmt: skip
        if refused == "open":  # (another request of the agent came first, as the checks above say)
            raise self._too_many_open(req.agent)
        if refused is not None:
            raise self._scope_period_refusal(req.agent, refused)

        def follow(first: list[Appended]) -> list[Prepared]:
            [appended] = first
            if appended.duplicate:
                raise Conflict(f"this request is already in the log as entry {appended.index}")
            o = SittingOpen(
                nonce=_nonce("sitting-open", request_hash.hex()),
                issued_at=statements.format_time(_now()),
                service=self.key.id,
                agent=req.agent,
                request_index=appended.index,
                request_sha256=request_hash.hex(),
                exam=req.exam,
                form=form,
                commitment=commitment(secret),
                deadline=statements.format_time(deadline),
                opened_at=statements.format_time(_now()),
            )
            return [prepare(msgspec.to_builtins(dsse.sign(make_open(o), [self.key])))]

        try:
            request, opened = await self.log.append_checked(checked, follow=follow)
        except BaseException:
            await self.store.void(request_hash)
            raise
        root = await self._root_at(opened.index + 1)
        await self.store.opened(request_hash, opened.index, root)
        items = instantiate(form, sitting_seed(secret, root, request_hash))
        public = [
            PublicItem(i.id, i.dimension, i.grader, i.ask.kind, i.ask.prompts, i.ask.times,
                       i.timeout_ms or base.file.default_timeout_ms)
            for i in items
        ]  # fmt: skip
        return Opened(
            opened.index, request.index, req.exam, statements.format_time(deadline),
            base.file.instructions, public, token.hex(),
        )  # fmt: skip

    async def _scope_once_a_period(self, agent: str, exam: str) -> None:
        """Refuse a second agent-started scope sitting within :attr:`SittingConfig.scope_interval_s`."""
        interval = self.config.scope_interval_s
        if interval <= 0 or not exam.startswith(SCOPE_PREFIX):
            return
        newest = await self.store.newest_of(agent, SCOPE_PREFIX, self._scope_spacing())
        if newest is not None:
            raise self._scope_period_refusal(agent, newest)

    def _scope_period_refusal(self, agent: str, newest: dt.datetime) -> RateLimited:
        spacing = self._scope_spacing()
        wait = max(1, math.ceil(spacing - (_now() - newest).total_seconds()))
        return RateLimited(
            f"{agent} requested a scope sitting at {statements.format_time(newest)}; one scope sitting "
            f"per {self.config.scope_interval_s:g} s is allowed (the view shows the latest run, so retries "
            f"until a run goes well are refused; requests {spacing:g} s apart, the period and a sitting's "
            f"deadline, so that two never close in one week): try again in {wait} s",
            retry_after=wait,
        )

    def _too_many_open(self, agent: str) -> RateLimited:
        return RateLimited(
            f"{agent} already has {self.config.max_unsettled} sittings open; report them or let them "
            "expire first"
        )

    def _scope_spacing(self) -> float:
        """Seconds between an agent's scope sitting requests: the period and the deadline, so that two
        sittings' closes (each within its deadline of its request) are always a period apart and never
        count in one week of the view (a review got two in one week with requests a period apart)."""
        return self.config.scope_interval_s + self.config.deadline_s

    async def _form_at_open(self, agent: str, exam: str) -> list[FormPart]:
        """The exam's published form; for ``scope@1``, one built from the agent's newest card (the open
        statement carries it, so the sitting regenerates from the log alone)."""
        if exam != SCOPE_EXAM:
            return form_for(exam)
        leaf = await ScopeStore(self.log.store.pool).newest_card(agent)
        card = None if leaf is None else audit.parse_leaf(leaf).statement.predicate
        if not isinstance(card, AgentCard):
            raise InvalidInput(f"{agent} has no agent card")
        return scope_form(*declarations_of(card))

    async def _root_at(self, size: int) -> bytes:
        """The log's root at ``size``, integrating up to it first if the integrator has not yet."""
        for _ in range(500):
            cp = await self.log.store.latest_checkpoint()
            if cp is not None and cp.size >= size:
                break
            if await self.log.integrate_once() is None:
                await asyncio.sleep(0.02)  # another integrator holds the lock
        nodes = await self.log.store.nodes(merkle.required_nodes(merkle.root_ranges(size)))
        return merkle.root_from_nodes(size, nodes)

    # --- sitting -----------------------------------------------------------------------------------------

    async def _open_row(self, index: int) -> SittingRow:
        row = await self.store.get(index)
        if row is None or row.root is None:
            raise NotFound(f"there is no sitting at log index {index}")
        if row.state != "open":
            raise Conflict(f"sitting {index} is closed (reported, or expired at its deadline)")
        return row

    async def _items(self, row: SittingRow) -> list[Item]:
        assert row.root is not None
        assert row.open_index is not None
        if row.exam == SCOPE_EXAM:  # its form is in the sitting-open statement
            leaf = await ScopeStore(self.log.store.pool).leaf(row.open_index)
            assert leaf is not None
            opened = audit.parse_leaf(leaf).statement.predicate
            assert isinstance(opened, SittingOpen)
            form = opened.form
        else:
            form = form_for(row.exam)
        return instantiate(form, sitting_seed(row.secret, row.root, row.request_sha256))

    async def dialogue(self, index: int, token: str, item_id: str, outputs: list[str]) -> str | None:
        """The counterpart's next message after ``outputs`` (the agent's moves so far, one new at most).

        Moves are recorded as they are played and can never be taken back; the report must repeat them.
        """
        row = await self._open_row(index)
        given = (
            bytes.fromhex(token) if len(token) == 64 and all(c in "0123456789abcdef" for c in token) else b""
        )
        if not hmac.compare_digest(hashlib.sha256(given).digest(), row.token_sha256):
            raise SignatureError("wrong sitting token (it is in the response that opened the sitting)")
        if _now() > row.deadline:
            raise Conflict(f"sitting {index} is past its deadline")
        if len(outputs) > MAX_DIALOGUE_TURNS or any(len(o) > MAX_MOVE_CHARS for o in outputs):
            raise InvalidInput(f"at most {MAX_DIALOGUE_TURNS} moves of {MAX_MOVE_CHARS} characters")
        if not all(_storable(o) for o in outputs):  # PostgreSQL's jsonb holds neither (was a 500)
            raise InvalidInput("a move must contain no NUL (U+0000) and no lone surrogate")
        item = next(
            (i for i in (await self._items(row)) if i.id == item_id and i.ask.kind == "dialogue"), None
        )
        if item is None:
            raise NotFound(f"sitting {index} has no dialogue item {item_id!r}")
        play = get_grader(item.grader).dialogue
        assert play is not None
        stored = row.transcripts.get(item_id, [])
        if outputs != stored:
            if outputs[:-1] != stored:
                raise Conflict("moves already played cannot be changed; send them all plus at most one new")
            if stored and play(item, stored) is None:
                raise Conflict("this dialogue has ended")
            if not await self.store.record_moves(index, item_id, outputs, len(stored)):
                raise Conflict("another move for this item arrived at the same time; resend")
        return play(item, outputs)

    async def report(self, index: int, body: bytes) -> Closed:
        [prepared] = self.log.parse_body(body, kinds={"sitting-report"}, single=True)
        r = prepared.statement.predicate
        assert isinstance(r, SittingReport)
        if r.sitting != index:
            raise InvalidInput(f"the report names sitting {r.sitting}, not {index}")
        checked = await self.log.check_prepared([prepared], batch=False)
        self._claimed(r.issued_at)
        row = await self._open_row(index)
        if r.agent != row.agent:
            raise InvalidInput(f"sitting {index} belongs to another agent")
        if r.commitment != commitment(row.secret):
            raise InvalidInput("the report's commitment is not this sitting's")
        if _now() > row.deadline:
            await self.expire(index)
            raise Conflict(f"sitting {index} passed its deadline and was closed with every item failed")
        if await self.log.store.nonce_used(r.agent, r.nonce):
            raise NonceReplay(f"nonce {r.nonce!r} of {r.agent} was already used")
        items = await self._items(row)
        self.log.charge([r.agent])
        async with self._grading:
            grades = await asyncio.to_thread(grade_sitting, items, r.items, row.transcripts)

        def follow(first: list[Appended]) -> list[Prepared]:
            [appended] = first
            if appended.duplicate:
                raise Conflict(f"this report is already in the log as entry {appended.index}")
            return [self._close(row, index, items, grades, appended.index, prepared.statement_hash.hex())]

        try:
            report, close = await self.log.append_checked(checked, follow=follow, charged=True)
        except NonceReplay as exc:  # the close's nonce: another report (or the sweep) closed it first
            raise Conflict(f"sitting {index} is closed (reported, or expired at its deadline)") from exc
        await self.store.closed(index, close.index)
        return Closed(index, report.index, close.index, grades)

    def _close(
        self, row: SittingRow, index: int, items: list[Item], grades: list[ItemGrade],
        report_index: int | None, report_sha256: str | None,
    ) -> Prepared:  # fmt: skip
        assert row.root is not None
        c = SittingClose(
            nonce=_close_nonce(index),
            issued_at=statements.format_time(_now()),
            service=self.key.id,
            agent=row.agent,
            sitting=index,
            exam=row.exam,
            commitment=commitment(row.secret),
            secret=row.secret.hex(),
            root=row.root.hex(),
            items_digest=items_digest(items),
            outcome="expired" if report_index is None else "reported",
            report_index=report_index,
            report_sha256=report_sha256,
            closed_at=statements.format_time(_now()),
            items=[_graded(g) for g in grades],
            dialogues={k: v for k, v in sorted(row.transcripts.items()) if v},
        )
        return prepare(msgspec.to_builtins(dsse.sign(make_close(c), [self.key])))

    async def expire(self, index: int) -> int | None:
        """Close an overdue sitting with every item failed; the close's index (None if already closed)."""
        row = await self.store.get(index)
        if row is None or row.state != "open":
            return None
        items = await self._items(row)
        prepared = self._close(row, index, items, expired_grades(items), None, None)
        try:
            [appended] = await self.log.append([prepared], batch=False)
        except NonceReplay:
            # Closed already: by a report, by this sweep before a crash, or by another process's sweep
            # (one that lost the job's lease part-way through its step). The close's nonce finds it.
            found = await index_by_nonce(self.log.store.pool, self.key.id, _close_nonce(index))
            if found is None:
                raise
            await self.store.closed(index, found)
            return None
        await self.store.closed(index, appended.index)
        return appended.index

    async def status(self, index: int) -> SittingRow:
        row = await self.store.get(index)
        if row is None:
            raise NotFound(f"there is no sitting at log index {index}")
        return row

    # --- background ------------------------------------------------------------------------------------

    async def sweep(self) -> int:
        """Expire overdue sittings and settle ones whose opening was cut short; how many were expired."""
        for row in await self.store.stale_opening(_now() - dt.timedelta(seconds=60)):
            request_index = await self.log.store.statement_index(row.request_sha256)
            if request_index is None:
                await self.store.void(row.request_sha256)
            else:  # the sitting-open follows its request in the same transaction
                await self.store.opened(
                    row.request_sha256, request_index + 1, await self._root_at(request_index + 2)
                )
        expired = 0
        for index in await self.store.due(_now()):
            expired += (await self.expire(index)) is not None
        return expired

    def _claimed(self, text: str) -> None:
        latest = _now() + dt.timedelta(seconds=self.config.clock_skew)
        statements.check_claimed_time(text, what="issued_at", latest=latest)


__all__ = ["Closed", "FormPart", "Opened", "PublicItem", "SittingConfig", "SittingService"]


def _storable(text: str) -> bool:
    """Whether ``text`` can be stored in PostgreSQL text or jsonb: no NUL, valid UTF-8 (no lone surrogate)."""
    if "\x00" in text:
        return False
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True
