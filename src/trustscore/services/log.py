"""The log service: accept signed submissions, integrate them, serve checkpoints, entries and proofs."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Collection

import msgspec

from trustscore.errors import (
    TOO_DEEP,
    InvalidInput,
    NotFound,
    NotYetAvailable,
    RateLimited,
    TrustscoreError,
    UnsupportedKind,
)
from trustscore.kinds import catalog as kinds_all
from trustscore.kinds.admission import Registration, admit, registration_of
from trustscore.ledger import checkpoint, dsse, merkle, note, statements
from trustscore.ledger.keys import SigningKey, is_key_id
from trustscore.ledger.submission import CheckedEntry, Prepared, check, prepare
from trustscore.services.coalesce import Coalescer
from trustscore.services.metrics import Metrics
from trustscore.services.ratelimit import KeyRateLimiter
from trustscore.services.tiles import DEFAULT_CACHE_BYTES, TileService
from trustscore.store.log import Appended, Follow, ListedEntry, LogStore, StoredCheckpoint, StoredEntry

assert kinds_all.ALL_KINDS  # the server knows every statement kind

log = logging.getLogger(__name__)

#: Statement kinds clients may post to ``/v1/log/entries``; the others have their own routes or are the
#: server's own.
CLIENT_LOG_KINDS = frozenset({"agent-card", "party-card", "marketplace-approval"})
ROUTE_OF_KIND = {
    "agent-card": "POST /v1/log/entries",
    "party-card": "POST /v1/log/entries",
    "marketplace-approval": "POST /v1/log/entries",
    "exam-report": "POST /v1/reports",
    "settlement": "POST /v1/settlements",
    "event": "POST /v1/events",
    "work-record": "POST /v1/work-records",
    "sitting-request": "POST /v1/sittings",
    "sitting-report": "POST /v1/sittings/{index}/report",
    "subscription": "POST /v1/subscriptions",
    "subscription-revocation": "POST /v1/subscriptions",
}


def _named_parties(p: Prepared) -> list[str]:
    """Key ids a statement names besides its signers (whose registrations admission reads)."""
    return [p.statement.facts.subject, *(getattr(p.statement.predicate, f, "") for f in ("seller", "buyer"))]


_VERIFY_IN_THREAD = 32  # batches at least this large are parsed and verified off the event loop
_VERIFY_CHUNK = 250  # signatures verified per worker thread (pynacl releases the GIL while verifying)
_GROUP_ENTRIES = 10_000  # appends waiting for the log are committed together, up to this many entries
_KNOWN_KEYS = 50_000  # registrations kept in memory (~500 bytes each, 25 MB at most); then it starts again

# The common case, decoded straight into envelopes in one pass; anything this rejects is decoded again
# generically so that errors name the offending position exactly as before.
_envelopes_decoder = msgspec.json.Decoder(list[dsse.Envelope] | dsse.Envelope)


def _at(pos: int | None, exc: TrustscoreError) -> TrustscoreError:
    if pos is None:
        return exc
    return type(exc)(f"entries[{pos}]: {exc.message}", **exc.extra)


class LogService:
    def __init__(
        self,
        store: LogStore,
        log_key: SigningKey,
        origin: str,
        *,
        max_batch: int,
        metrics: Metrics | None = None,
        limiter: KeyRateLimiter | None = None,
        address_limiter: KeyRateLimiter | None = None,
        reads: LogStore | None = None,
        tile_cache_bytes: int = DEFAULT_CACHE_BYTES,
    ) -> None:
        self.store = store  # the primary: writes, and reads that must see them
        # Public reads (checkpoint, entries, proofs, keys): a streaming replica's store, or the primary's.
        self.reads = store if reads is None else reads
        self.log_key = log_key
        self.origin = origin
        self.max_batch = max_batch
        self.metrics = metrics or Metrics()
        self._ingest_seconds = self.metrics.ingest_seconds.labels("log")  # one lookup, not one per request
        self.limiter = limiter
        self.address_limiter = address_limiter  # entries per client address (docs/service.md)
        self.verifier_key = note.make_verifier_key(origin, log_key.public_key)
        self.checkpoint_size: int | None = None  # of the latest checkpoint this process has seen
        # Proofs and /tile share one cache of tiles (a tile of a given width never changes).
        self.tiles = TileService(self.reads, store, tile_cache_bytes)
        # The largest checkpoint each store was seen to hold (a store's checkpoints only grow), so that a
        # proof within it needs no query: (reads, primary); -1 before any checkpoint.
        self._covered = [-1, -1]
        self._own_keys: dict[str, bytes] = {log_key.id: log_key.public_key}
        self._waiting: list[tuple[list[CheckedEntry], Follow | None, asyncio.Future[list[Appended]]]] = []
        self._committer: asyncio.Task[None] | None = None
        # Concurrent requests share their lookups (one query for many single-entry appends).
        self._registrations = Coalescer[str, Registration](store.registrations)
        # A registration never changes once made (kinds/admission.py; the keys table is append-only), so
        # one found is kept: an agent's reports and a party's statements need no lookup of their signer.
        self._known: dict[str, Registration] = {}
        self._existing = Coalescer[bytes, Appended](store.existing)

    # --- writing -------------------------------------------------------------------------------------

    def parse_body(
        self, body: bytes, kinds: Collection[str] = CLIENT_LOG_KINDS, *, single: bool = False
    ) -> list[Prepared]:
        """One envelope or a JSON array of envelopes, structurally checked, each of one of ``kinds``."""
        raw: object
        try:
            raw = _envelopes_decoder.decode(body)
        except (msgspec.DecodeError, RecursionError):
            try:
                raw = msgspec.json.decode(body)
            except msgspec.DecodeError as exc:
                raise InvalidInput(f"body is not valid JSON: {exc}") from exc
            except RecursionError as exc:
                raise InvalidInput(TOO_DEEP) from exc
        if isinstance(raw, list):
            if single:
                raise InvalidInput("this endpoint takes one envelope, not an array")
            if not raw:
                raise InvalidInput("empty batch")
            if len(raw) > self.max_batch:
                raise InvalidInput(f"a batch holds at most {self.max_batch} envelopes, got {len(raw)}")
            items: list[tuple[int | None, object]] = list(enumerate(raw))
        else:
            items = [(None, raw)]
        out = []
        for pos, item in items:
            try:
                p = prepare(item)
                if p.statement.kind.name not in kinds:
                    where = ROUTE_OF_KIND.get(
                        p.statement.kind.name, "no public endpoint: the server makes these itself"
                    )
                    raise UnsupportedKind(
                        f"{p.statement.kind.name} statements are not accepted here ({where})"
                    )
                out.append(p)
            except TrustscoreError as exc:
                raise _at(pos, exc) from exc
        return out

    async def submit(self, body: bytes, address: str | None = None) -> list[Appended]:
        """``POST /v1/log/entries``: cards (one envelope or a batch), charged to ``address`` per new entry."""
        started = time.perf_counter()
        # A body big enough to hold a batch worth verifying off the loop is parsed off the loop too.
        big = len(body) >= _VERIFY_IN_THREAD * 512
        try:
            prepared = await asyncio.to_thread(self.parse_body, body) if big else self.parse_body(body)
            out = await self.append(
                prepared, batch=len(prepared) > 1 or body.lstrip()[:1] == b"[", address=address
            )
        except TrustscoreError as exc:
            self.metrics.submissions_refused.labels(exc.code).inc()
            self.refused(address)
            raise
        self._ingest_seconds.observe(time.perf_counter() - started)
        return out

    async def _lookups(self, prepared: list[Prepared]) -> tuple[dict[str, Registration], dict[str, bytes]]:
        ids = {s.keyid for p in prepared for s in p.envelope.signatures}
        ids |= {k for p in prepared for k in _named_parties(p)}
        # Only a key id can be registered: anything else is simply unregistered (admission then refuses
        # it by name) and never reaches the database, whose text type refuses some strings outright.
        regs = await self._registered({k for k in ids if is_key_id(k)})
        return regs, {self.log_key.id: self.log_key.public_key}

    async def _registered(self, ids: set[str]) -> dict[str, Registration]:
        """The registrations of ``ids`` that exist: those seen before from memory, the others looked up."""
        known = self._known
        found = {k: known[k] for k in ids if k in known}
        if len(found) < len(ids):
            fetched = await self._registrations.get(ids - found.keys())
            if len(known) + len(fetched) > _KNOWN_KEYS:
                known.clear()
            known.update(fetched)
            found.update(fetched)
        return found

    async def check_prepared(self, prepared: list[Prepared], *, batch: bool = True) -> list[CheckedEntry]:
        """Verify signatures and admission rules of ``prepared`` in order, without appending.

        A key registered by a card counts only for statements after that card (as when the log is
        replayed offline in order).
        """
        registered, fixed = await self._lookups(prepared)
        in_batch: dict[str, Registration] = {}
        positions: dict[str, int] = {}
        for pos, p in enumerate(prepared):
            reg = registration_of(p.statement)
            if reg is not None and reg.id not in registered:
                positions.setdefault(reg.id, pos)
                in_batch.setdefault(reg.id, reg)

        def lookup_at(pos: int) -> tuple[Callable[[str], Registration | None], Callable[[str], bytes | None]]:
            def lookup(kid: str) -> Registration | None:
                if kid in registered:
                    return registered[kid]
                return in_batch[kid] if positions.get(kid, pos) < pos else None

            def key(kid: str) -> bytes | None:
                reg = lookup(kid)
                return fixed.get(kid) if reg is None else reg.public_key

            return lookup, key

        def verify(start: int, stop: int) -> list[CheckedEntry]:
            out = []
            for pos in range(start, stop):
                lookup, key = lookup_at(pos)
                try:
                    entry = check(prepared[pos], key)
                    signers = [s.keyid for s in prepared[pos].envelope.signatures]
                    admit(entry.statement, signers, lookup, self.log_key.id)
                    # After the signatures: a non-compact payload's key-by-key read costs about what
                    # parsing it did, paid only by a signer the log admits (found by review).
                    statements.check_new(prepared[pos].statement, prepared[pos].payload)
                    out.append(entry)
                except TrustscoreError as exc:
                    raise _at(pos if batch else None, exc) from exc
            return out

        if len(prepared) < _VERIFY_IN_THREAD:
            checked = verify(0, len(prepared))
        else:
            bounds = range(0, len(prepared), _VERIFY_CHUNK)
            parts = await asyncio.gather(
                *(asyncio.to_thread(verify, i, min(i + _VERIFY_CHUNK, len(prepared))) for i in bounds),
                return_exceptions=True,
            )
            checked = []
            for part in parts:  # in order, so the first failing position is the one reported
                if isinstance(part, BaseException):
                    raise part
                checked += part
        return checked

    async def append(
        self,
        prepared: list[Prepared],
        *,
        batch: bool = True,
        follow: Callable[[list[Appended]], list[Prepared]] | None = None,
        charged: bool = False,
        address: str | None = None,
    ) -> list[Appended]:
        """Verify and admit every envelope, then append them all in one transaction (all or nothing).

        ``follow`` makes statements that must enter the log right after these, in the same transaction,
        from their results (the server's graded evidence pointing at a report's index). ``charged``: the
        caller already charged the signers' and the address's rate limits.
        """
        checked = await self.check_prepared(prepared, batch=batch)
        return await self.append_checked(checked, follow=follow, charged=charged, address=address)

    async def append_checked(
        self,
        checked: list[CheckedEntry],
        *,
        follow: Callable[[list[Appended]], list[Prepared]] | None = None,
        charged: bool = False,
        address: str | None = None,
    ) -> list[Appended]:
        """:meth:`append` of entries :meth:`check_prepared` already verified and admitted (signatures
        and registrations never change once checked, so the check holds however long ago it ran).

        Limits count entries, not requests, and a statement already in the log costs nothing: it is
        answered with its first index (``duplicate``) before anything is charged.
        """
        if not charged:
            known = await self._existing.get([e.statement_hash for e in checked])
            if follow is None and len(known) == len(checked):
                return [known[e.statement_hash] for e in checked]
            self.charge([e.signer for e in checked if e.statement_hash not in known], address)
        store_follow: Follow | None = None
        if follow is not None:
            make = follow

            def store_follow(first: list[Appended]) -> list[CheckedEntry]:
                return [self._check_own(p) for p in make(first)]

        out = await self._commit(checked, store_follow)
        self.metrics.entries_appended.inc(sum(not a.duplicate for a in out))
        return out

    def charge(self, signers: list[str], address: str | None = None) -> None:
        """Spend the write allowance of ``signers`` (one per statement) and of the client ``address``
        (one per statement, whoever signed it); the server's keys are free. All or nothing: when one
        allowance refuses, what the others spent is given back (a refused request then costs its
        address the one token of :meth:`refused`, not its statements' too)."""
        counts: dict[str, int] = {}
        for signer in signers:
            if signer not in self._own_keys:
                counts[signer] = counts.get(signer, 0) + 1
        if self.address_limiter is not None and address is not None and counts:
            self.address_limiter.take(address, sum(counts.values()))
        if self.limiter is None:
            return
        taken: list[tuple[str, int]] = []
        try:
            for signer, n in sorted(counts.items()):
                self.limiter.take(signer, n)
                taken.append((signer, n))
        except (RateLimited, InvalidInput):
            for signer, n in taken:
                self.limiter.give(signer, n)
            if self.address_limiter is not None and address is not None:
                self.address_limiter.give(address, sum(counts.values()))
            raise

    def refused(self, address: str | None) -> None:
        """A refused write from ``address`` costs it one entry, so a flood of bad requests is limited too."""
        if self.address_limiter is not None and address is not None:
            self.address_limiter.spend(address)

    def trust_own_key(self, key: SigningKey) -> None:
        """Let statements the server makes with ``key`` (already registered) follow others in a transaction."""
        self._own_keys[key.id] = key.public_key

    def _check_own(self, p: Prepared) -> CheckedEntry:
        """Check a statement the server itself made and signed with one of its own keys."""
        return check(p, self._own_keys.get)

    async def _commit(self, checked: list[CheckedEntry], follow: Follow | None = None) -> list[Appended]:
        """Append ``checked`` atomically, in one transaction with any other appends waiting meanwhile.

        Appends serialise on the log's sequence row until they commit, so committing those that queue up
        behind a commit together (each under its own savepoint) turns many commit waits into one.
        """
        done: asyncio.Future[list[Appended]] = asyncio.get_running_loop().create_future()
        self._waiting.append((checked, follow, done))
        if self._committer is None or self._committer.done():
            self._committer = asyncio.create_task(self._commit_waiting())
        return await done

    async def _commit_waiting(self) -> None:
        while self._waiting:
            take, size = 0, 0
            while take < len(self._waiting) and (
                take == 0 or size + len(self._waiting[take][0]) <= _GROUP_ENTRIES
            ):
                size += len(self._waiting[take][0])
                take += 1
            group, self._waiting = self._waiting[:take], self._waiting[take:]
            try:
                results = await self.store.append_groups([(entries, f) for entries, f, _ in group])
            except Exception as exc:
                for _, _, done in group:
                    if not done.done():
                        done.set_exception(exc)
                continue
            except BaseException:  # cancelled: nobody may wait forever
                for _, _, done in group + self._waiting:
                    done.cancel()
                self._waiting = []
                raise
            for (_, _, done), result in zip(group, results, strict=True):
                if done.done():
                    continue
                if isinstance(result, Exception):
                    done.set_exception(result)
                else:
                    done.set_result(result)

    # --- integration ---------------------------------------------------------------------------------

    def sign_checkpoint(self, size: int, root: bytes) -> str:
        return checkpoint.sign_checkpoint(
            checkpoint.Checkpoint(self.origin, size, root), self.log_key, self.origin
        )

    async def integrate_once(self, max_batch: int = 50_000) -> StoredCheckpoint | None:
        cp = await self.store.integrate(self.sign_checkpoint, max_batch=max_batch)
        if cp is None:
            latest = await self.store.latest_checkpoint()
            self.checkpoint_size = None if latest is None else latest.size
        else:
            self.metrics.integrated_size.inc(cp.size - (self.checkpoint_size or 0))
            self.checkpoint_size = cp.size
        return cp

    async def follow_checkpoints(self) -> None:
        """Learn the newest checkpoint another process signed (an ``api`` process runs no integrator,
        yet its ratings name the checkpoint that covers them, and its reads fall back by it)."""
        latest = await self.store.latest_checkpoint()
        if latest is not None and latest.size > (self.checkpoint_size or 0):
            self.checkpoint_size = latest.size

    async def integrate_pending(self, max_batch: int = 50_000) -> None:
        """Integrate every sequenced entry, ``max_batch`` at a time (the integrator's periodic step)."""
        while await self.integrate_once(max_batch) is not None:
            pass

    # --- reading -------------------------------------------------------------------------------------
    # Reads go to ``self.reads``. A replica may lag but never disagrees: what it holds is a prefix of the
    # primary's log, so every answer is true of the tree size it names. A request the replica cannot
    # answer yet that the primary can (a tree size, an entry or a key it has not replayed) goes to the
    # primary, so a replica never answers "not yet" for what this service has already confirmed.

    @property
    def replicated(self) -> bool:
        """Whether public reads go to a read database apart from the primary."""
        return self.reads is not self.store

    def _fallback(self, what: str) -> LogStore:
        self.metrics.read_fallbacks.labels(what).inc()
        return self.store

    async def latest_checkpoint(self, *, fresh: bool = False) -> StoredCheckpoint:
        """The latest checkpoint of the read database; ``fresh``: of the primary (for callers that must
        see what was just integrated)."""
        cp = await (self.store if fresh else self.reads).latest_checkpoint()
        if cp is None:
            raise NotYetAvailable("no checkpoint has been signed yet")
        return cp

    async def key_entry(self, key_id: str) -> tuple[bytes, int]:
        found = await self.reads.key_entry(key_id)
        if found is None and self.replicated:
            found = await self._fallback("key").key_entry(key_id)
        if found is None:
            raise NotFound(f"no key {key_id} is registered")
        return found

    async def listed(self, start: int, end: int) -> list[ListedEntry]:
        """Entries ``[start, end)`` by kind, signer and subject (no leaf read); a range the replica ends
        short of what this process knows is integrated comes from the primary, as :meth:`entries`."""
        rows = await self.reads.listed(start, end)
        if start + len(rows) < min(end, self.checkpoint_size or 0) and self.replicated:
            rows = await self._fallback("entries").listed(start, end)
        return rows

    async def entries(
        self, start: int, end: int | None, max_page: int, max_bytes: int | None = None
    ) -> list[StoredEntry]:
        """Entries ``[start, end)``, at most ``max_page``, and with ``max_bytes`` only those whose leaves
        before them hold fewer bytes (at least one entry). Without ``end`` (following the log's tail), what
        the read database holds; with ``end``, a page the replica ends short of what this process knows
        is integrated comes from the primary (so a range past the log's end stays on the replica)."""
        if start < 0:
            raise InvalidInput("start must be >= 0")
        stop = start + max_page if end is None else min(end, start + max_page)
        if stop <= start:
            raise InvalidInput("end must be greater than start")
        rows = await self.reads.entries(start, stop, max_bytes)
        integrated = min(stop, self.checkpoint_size or 0)
        short = max_bytes is not None and sum(len(r.leaf) for r in rows) >= max_bytes  # cut by bytes
        if end is not None and start + len(rows) < integrated and not short and self.replicated:
            rows = await self._fallback("entries").entries(start, stop, max_bytes)
        return rows

    async def _holding(self, size: int) -> LogStore:
        """The store whose latest checkpoint covers the tree of ``size``: the read database's when it
        does, else the primary's when it does; NotYetAvailable otherwise. A size within a checkpoint
        already seen costs no query."""
        if size <= self._covered[0]:
            return self.reads
        cp = await self.reads.latest_checkpoint()
        if cp is not None:
            self._covered[0] = max(self._covered[0], cp.size)
            if size <= cp.size:
                return self.reads
        if self.replicated:
            if size > self._covered[1]:
                cp = await self.store.latest_checkpoint()
                self._covered[1] = max(self._covered[1], -1 if cp is None else cp.size)
            if size <= self._covered[1]:
                return self._fallback("proof")
        raise NotYetAvailable(
            f"tree size {size} is beyond the latest checkpoint ({0 if cp is None else cp.size})"
        )

    async def inclusion_proof(self, index: int, size: int) -> list[bytes]:
        if size < 1 or index < 0 or index >= size:
            raise InvalidInput("need 0 <= index < size")
        store = await self._holding(size)
        return await self._assemble(store, size, merkle.inclusion_proof_ranges(index, size))

    async def consistency_proof(self, size1: int, size2: int) -> list[bytes]:
        if size1 < 0 or size2 < size1:
            raise InvalidInput("need 0 <= from <= to")
        store = await self._holding(size2)
        return await self._assemble(store, size2, merkle.consistency_proof_ranges(size1, size2))

    async def _assemble(self, store: LogStore, size: int, ranges: list[tuple[int, int]]) -> list[bytes]:
        """The proof of ``ranges`` of the tree of ``size`` from the tiles of ``store`` (kept in memory)."""
        nodes = await self.tiles.proof_nodes(merkle.required_nodes(ranges), size, store)
        try:
            return merkle.assemble(ranges, nodes)
        except KeyError as exc:
            raise NotFound("proof nodes are not integrated yet") from exc
