"""Signed rating attestations: the served rating, the entries it was computed from, and their proofs.

The rating is the one ``GET /v1/agents/{id}/rating`` serves. Its entries are the agent's evidence entries
and, under a model whose reliability reads them (baseline-v0.3), its snapshot entries; what weighted each
report by a third party or by the agent itself (its reporter's trustscore-v2 snapshots, approvals and
vouches); and the card of every key needed to check them. Each is proven against the latest checkpoint,
which must cover the rating's log size. Before a bundle leaves the server it is verified exactly as
``trustscore rating verify`` would, so the server never signs a rating it cannot reproduce. See
docs/attestations.md.

A bundle's cost grows with its entries and their bytes (~0.2 ms of CPU and ~2.1 KB of JSON for a
marketplace event; a rating snapshot entry of 100 agents' rows ~17.5 KB, of 1,000 as logs written before
2026-12-06 hold ~151 KB and ~4 ms), and anyone may ask: a
bundle holds at most :data:`MAX_BUNDLE_ENTRIES` entries and :data:`MAX_BUNDLE_BYTES` bytes of JSON
(estimated from the leaves' stored lengths before any is read; 422 beyond), the bundles being made at once
weigh at most :attr:`BundleLimits.in_flight` bytes in all (a request waits for room up to
:attr:`BundleLimits.max_wait` seconds, then 503), and a bundle (or a refusal) made for an agent and model
is served again for :attr:`BundleLimits.reuse_s` seconds, to every request that asks meanwhile (one
making at a time per agent and model).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import sys
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import msgspec

from trustscore.attestations import rating as attestation
from trustscore.errors import (
    Busy,
    ConfigError,
    NotFound,
    NotYetAvailable,
    RateLimited,
    TooLarge,
    TrustscoreError,
)
from trustscore.evidence.reporters import REPORTER_MODEL
from trustscore.evidence.standing import MIN_RATING, VOUCHING
from trustscore.kinds.approvals import MARKETPLACE_APPROVAL
from trustscore.ledger import dsse, merkle, note
from trustscore.ledger.checkpoint import Checkpoint
from trustscore.ledger.keys import SigningKey
from trustscore.services.budget import WorkBudget
from trustscore.services.kept import Budgeted
from trustscore.services.metrics import Metrics
from trustscore.services.public import PublicService
from trustscore.services.single_flight import SingleFlight
from trustscore.store.attestations import AttestationStore
from trustscore.store.log import StoredCheckpoint

_json = msgspec.json.Encoder()

#: Seconds a bundle's making waits for a checkpoint covering its rating.
CHECKPOINT_WAIT = 5.0
#: Entries one bundle holds at most.
MAX_BUNDLE_ENTRIES = 20_000
#: Bytes of JSON one bundle holds at most (:func:`json_estimate`): its making a few seconds of the
#: server's CPU and a few times that in memory.
MAX_BUNDLE_BYTES = 32 << 20
#: Bytes of an inclusion proof's hash in the JSON (base64 of 32 bytes, quotes, comma), and of the rest of
#: an entry (index, keys, brackets, and its index again in the attestation's list).
_PROOF_HASH_JSON, _ENTRY_JSON = 47, 64


@dataclass(frozen=True)
class BundleLimits:
    max_entries: int = MAX_BUNDLE_ENTRIES
    max_bytes: int = MAX_BUNDLE_BYTES
    in_flight: int = MAX_BUNDLE_BYTES  # estimated JSON of the bundles being made at once: one of the largest
    max_wait: float = 5.0  # seconds a request waits for room among them, then 503
    reuse_s: float = 30.0  # a bundle (or a refusal) for an agent and model is served again for this long
    per_address: int = 1  # makings one client address may have started and not seen end
    kept_bytes: int = 2 * MAX_BUNDLE_BYTES  # JSON of the bundles kept for reuse, least recent out first


async def build_bundle(
    public: PublicService,
    store: AttestationStore,
    key: SigningKey,
    agent: str,
    model: str | None,
    *,
    checkpoint_wait: float = CHECKPOINT_WAIT,
    limits: BundleLimits | None = None,
    budget: WorkBudget | None = None,
) -> attestation.Bundle:
    """A verified bundle attesting ``agent``'s served rating under ``model`` (default model if None);
    TooLarge past ``limits``; its making holds its estimated bytes (:func:`json_estimate`) of ``budget``."""
    bundle, _ = await _made_bundle(
        public, store, key, agent, model, checkpoint_wait, limits, budget, encode=False
    )
    return bundle


async def _made_bundle(
    public: PublicService,
    store: AttestationStore,
    key: SigningKey,
    agent: str,
    model: str | None,
    checkpoint_wait: float,
    limits: BundleLimits | None,
    budget: WorkBudget | None,
    *,
    encode: bool,
) -> tuple[attestation.Bundle, bytes]:
    """The bundle, and its JSON if ``encode`` (made under the same hold of ``budget``)."""
    limits = limits or BundleLimits()
    log = public.log
    regs = await log.store.registrations([key.id])
    if key.id not in regs or attestation.SIGNER_ROLE not in regs[key.id].roles:
        raise ConfigError(
            f"the service key {key.id} is not registered with the {attestation.SIGNER_ROLE} role"
        )
    rated = await public.rating(agent, model)
    weights = public.ratings.model(model)
    cp = await _checkpoint_covering(public, rated.log_size, checkpoint_wait)
    indexes = await entries_of(
        store,
        agent,
        weights.model_version,
        rated.log_size,
        key.id,
        limits.max_entries,
        own_snapshots=weights.spec.reliability.use_snapshots,
    )
    weight = json_estimate(await store.leaf_bytes(indexes), len(indexes), cp.size)
    if weight > limits.max_bytes:
        raise TooLarge(
            f"the rating of {agent} is computed from {len(indexes)} log entries, a bundle of about {weight} "
            f"bytes, more than the {limits.max_bytes} a bundle holds; {_OFFLINE}"
        )
    async with contextlib.nullcontext() if budget is None else budget.hold(weight):
        leaves = await store.leaves(indexes)
        if [i for i, _ in leaves] != indexes:  # cannot happen: the log is append-only
            raise NotFound("some entries of the rating are missing from the log")
        ranges = {i: merkle.inclusion_proof_ranges(i, cp.size) for i in indexes}
        nodes = await log.store.nodes(merkle.required_nodes(r for rs in ranges.values() for r in rs))

        def signed() -> tuple[attestation.Bundle, bytes]:  # the CPU-bound part, off the event loop
            try:
                proofs = {i: merkle.assemble(rs, nodes) for i, rs in ranges.items()}
            except KeyError as exc:
                raise NotYetAvailable("proof nodes are not integrated yet") from exc
            payload = attestation.make_rating_attestation(
                rated.rating,
                signer=key.id,
                computed_at=rated.at,
                log_size=rated.log_size,
                checkpoint=Checkpoint(log.origin, cp.size, cp.root),
                evidence_entries=indexes,
            )
            bundle = attestation.make_bundle(
                dsse.sign(payload, [key]),
                log_verifier_key=log.verifier_key,
                checkpoint_note=cp.signed_note,
                entries=[(i, leaf, proofs[i]) for i, leaf in leaves],
                weights_model=weights.model_version,
            )
            try:
                attestation.verify_bundle(bundle, weights, note.parse_verifier_key(log.verifier_key))
            except TrustscoreError as exc:
                raise TrustscoreError(
                    f"the attestation of {agent} does not reproduce: {exc.message}"
                ) from exc
            return bundle, _json.encode(bundle) if encode else b""

        return await asyncio.to_thread(signed)


def json_estimate(leaf_bytes: int, entries: int, tree_size: int) -> int:
    """The bytes of a bundle's JSON, from above: its leaves in base64, an inclusion proof of at most
    ceil(log2(tree_size)) hashes each, and a bound on the rest of each entry and of the envelope."""
    proof = max(1, (tree_size - 1).bit_length()) * _PROOF_HASH_JSON
    return 4 * (leaf_bytes + 2 * entries) // 3 + entries * (proof + _ENTRY_JSON) + 4096


async def entries_of(
    store: AttestationStore,
    agent: str,
    model: str,
    size: int,
    signer: str,
    max_entries: int | None = None,
    *,
    own_snapshots: bool = True,
) -> list[int]:
    """The sorted log indexes ``agent``'s rating under ``model`` over [0, ``size``) is computed from;
    TooLarge if more than ``max_entries``: the agent's evidence and snapshot entries are counted up to
    there before they are listed, and the entries found are counted after each step.

    Every snapshot of ``model`` with a row for the agent is among them only if ``own_snapshots``: the
    model's reliability reads them all (``[reliability] use_snapshots``, baseline-v0.3's consistency
    term), and there is one per snapshot period, so a bundle carrying them grows with the time the agent
    has been rated, not with its evidence. Under a model whose reliability does not (trustscore-v2, v3)
    only what weighs a report is needed: where the agent vouches for a reporter, its own trustscore-v2
    snapshots that decide its standing are found by the reporter loop below, as any reporter's are (and
    where it reports itself, a self-attested work record, though since standing-v2 that record is pooled
    whatever its standing)."""
    if max_entries is not None:
        up_to = max_entries + 1
        own = await store.evidence_entry_count(agent, size, up_to)
        if own_snapshots:
            own += await store.snapshot_entry_count(agent, model, size, up_to)
        if own > max_entries:
            raise _too_many(agent, max_entries)

    def bounded(found: set[int]) -> set[int]:
        if max_entries is not None and len(found) > max_entries:
            raise _too_many(agent, max_entries)
        return found

    evidence = await store.evidence_entries(agent, size)
    # What weighted each third-party report: its reporter's newest reporter-model snapshot before it, the
    # first that rated it (how long it has had standing) and the operator's word on it as a marketplace.
    # The reporter is the entry's signer (a pooled item's issuer is the pool; evidence/standing.py).
    reports = await store.entry_signers(i for i, issuer in evidence if issuer is not None)
    found = {i for i, _ in evidence}
    if own_snapshots:
        found |= set(await store.snapshot_entries(agent, model, size))
    seen: set[tuple[int, str]] = set()
    while pending := set(reports) - seen:  # a reporter's vouch is a report whose reporter needs the same
        seen |= pending
        found |= set(await store.newest_snapshots_before(pending, REPORTER_MODEL))
        found |= set(await store.first_rated_snapshots_before(pending, REPORTER_MODEL, MIN_RATING))
        found |= set(
            await store.approvals_of({r for _, r in pending}, MARKETPLACE_APPROVAL.predicate_type, size)
        )
        vouches = await store.first_vouches_before(pending, MARKETPLACE_APPROVAL.predicate_type, VOUCHING)
        found = bounded(found | set(vouches))
        reports = [*reports, *await store.entry_signers(vouches)]
    ids = await store.signers(found) | {agent, signer} | {issuer for _, issuer in evidence if issuer}
    cards = await store.registration_entries(ids)
    if cards.get(signer, size) >= size:
        raise NotYetAvailable(f"the card of the service key {signer} is not yet among the rating's entries")
    # Cards from [size, ...) register keys that no entry below size needs (a card precedes its use).
    return sorted(bounded(found | {i for i in cards.values() if i < size}))


_OFFLINE = (
    "its evidence can be exported (trustscore evidence export) and the rating recomputed offline "
    "(trustscore score)"
)


def _too_many(agent: str, max_entries: int) -> TooLarge:
    return TooLarge(
        f"the rating of {agent} is computed from more than {max_entries} log entries, more than a bundle "
        f"holds; {_OFFLINE}"
    )


async def _checkpoint_covering(public: PublicService, size: int, wait: float) -> StoredCheckpoint:
    deadline = time.monotonic() + wait
    while True:
        cp = await public.log.latest_checkpoint(fresh=True)
        if cp.size >= size:
            return cp
        if time.monotonic() >= deadline:
            raise NotYetAvailable(f"no checkpoint covers the rating's log size {size} yet (latest {cp.size})")
        await asyncio.sleep(0.05)


@dataclass(frozen=True)
class Made:
    """A bundle as served: its JSON and its attestation (for a credential); or why there is none."""

    at: float  # time.monotonic() when made
    attestation: dsse.Envelope | None
    body: bytes
    refused: str | None = None  # the message of a TooLarge, given again while the refusal is kept

    @property
    def weight(self) -> int:
        """What keeping it counts against ``kept_bytes``: its JSON and a little for the rest."""
        return len(self.body) + 1024


class AttestationService:
    """Attestations of served ratings, as bundles or as W3C Verifiable Credentials."""

    def __init__(
        self,
        public: PublicService,
        store: AttestationStore,
        key: SigningKey,
        limits: BundleLimits | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self.public = public
        self.metrics = metrics
        self.store = store
        self.key = key
        self.limits = limits or BundleLimits()  # the budget's size and wait, the kept bytes: read here, once
        self._budget = WorkBudget(self.limits.in_flight, self.limits.max_wait, "bytes of bundles")
        # Bundles by (agent, model) in the order made (a read peeks: it does not move one), within a budget
        # of bytes; the newest always stays.
        self._made = Budgeted[tuple[str, str], Made](sys.maxsize, self.limits.kept_bytes, lambda m: m.weight)
        self._making = SingleFlight[tuple[str, str], Made]()
        self._makers: Counter[str] = Counter()  # client addresses of the makings they started

    async def bundle_json(self, agent: str, model: str | None, address: str | None = None) -> bytes:
        """The JSON of a bundle of ``agent``'s served rating (:meth:`made`)."""
        return (await self.made(agent, model, address)).body

    async def credential(self, agent: str, model: str | None, address: str | None = None) -> dict[str, Any]:
        made = await self.made(agent, model, address)
        assert made.attestation is not None  # a refusal is raised by made()
        return attestation.rating_credential(attestation.parse_attestation(made.attestation), self.key)

    async def made(self, agent: str, model: str | None, address: str | None = None) -> Made:
        """A bundle of ``agent``'s served rating: one made within the last ``reuse_s`` seconds for the same
        agent and model (it names the rating it attests), else a new one, shared by every caller that
        asks while it is made (a caller that leaves does not stop it). A refusal (TooLarge) is kept and
        given again the same way. A client ``address`` (None: not charged) may start ``per_address``
        makings at a time; one more is refused (RateLimited), joining one already started is not. Each
        refusal (TooLarge, RateLimited, Busy) is counted in ``trustscore_attestations_refused_total``."""
        try:
            return await self._made_or_kept(agent, model, address)
        except (TooLarge, RateLimited, Busy) as exc:
            if self.metrics is not None:
                self.metrics.attestations_refused.labels(exc.code).inc()
            raise

    async def _made_or_kept(self, agent: str, model: str | None, address: str | None) -> Made:
        key = (agent, self.public.ratings.model(model).model_version)  # an unknown model: NotFound here
        self._drop_expired()
        made = self._made.peek(key)
        if made is None:
            joining = self._making.under_way(key)
            if not joining and address is not None and self._makers[address] >= self.limits.per_address:
                raise RateLimited(
                    f"{self._makers[address]} attestation bundle(s) asked for from {address} are being "
                    "made; one client address starts one at a time",
                    retry_after=max(1, math.ceil(self.limits.max_wait)),
                )
            making = self._making.start(key, lambda: self._make(key, agent, model))
            if not joining and address is not None:
                self._makers[address] += 1
                making.add_done_callback(lambda _: self._release(address))
            made = await asyncio.shield(making)
        if made.refused is not None:
            raise TooLarge(made.refused)
        return made

    async def _make(self, key: tuple[str, str], agent: str, model: str | None) -> Made:
        try:
            bundle, body = await _made_bundle(
                self.public,
                self.store,
                self.key,
                agent,
                model,
                CHECKPOINT_WAIT,
                self.limits,
                self._budget,
                encode=True,
            )
            made = Made(time.monotonic(), bundle.attestation, body)
        except TooLarge as exc:
            made = Made(time.monotonic(), None, b"", refused=exc.message)
        self._made.put(key, made)
        return made

    def _drop_expired(self) -> None:
        """Forget what was made more than ``reuse_s`` ago (the oldest come first)."""
        too_old = time.monotonic() - self.limits.reuse_s
        self._made.drop_oldest_while(lambda made: made.at < too_old)

    def _release(self, address: str) -> None:
        self._makers[address] -= 1
        if not self._makers[address]:
            del self._makers[address]
