"""Signed rating attestations: the served rating, the entries it was computed from, and their proofs.

The rating is the one ``GET /v1/agents/{id}/rating`` serves. Its entries are the agent's evidence and
snapshot entries, the newest reporter snapshot before each report by a third party (what weighted it), and the card of
every key needed to check them; each is proven against the latest checkpoint, which must cover the
rating's log size. Before a bundle leaves the server it is verified exactly as ``trustscore rating
verify`` would, so the server never signs a rating it cannot reproduce. See docs/attestations.md.

Each entry costs the server ~0.2 ms of CPU and the answer ~1.9 KB (3,004 marketplace events: 0.55 s,
5.6 MB), and the request is anyone's: a bundle holds at most :data:`MAX_BUNDLE_ENTRIES` (more is refused
before any entry is read), the bundles being made at once hold at most :attr:`BundleLimits.in_flight`
entries in all (a request waits for room up to :attr:`BundleLimits.max_wait` seconds, then 503), and a
bundle made for an agent and model is served again for :attr:`BundleLimits.reuse_s` seconds, to every
request that asks meanwhile (one making at a time per agent and model).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import msgspec

from trustscore.attestations import rating as attestation
from trustscore.errors import ConfigError, NotFound, NotYetAvailable, TooLarge, TrustscoreError
from trustscore.evidence.reporters import REPORTER_MODEL
from trustscore.evidence.standing import MIN_RATING, POOL_ISSUER
from trustscore.kinds.approvals import MARKETPLACE_APPROVAL
from trustscore.ledger import dsse, merkle, note
from trustscore.ledger.checkpoint import Checkpoint
from trustscore.ledger.keys import SigningKey
from trustscore.reverify.evidence import ISSUER as REVERIFY_ISSUER
from trustscore.services.budget import WorkBudget
from trustscore.services.public import PublicService
from trustscore.store.attestations import AttestationStore
from trustscore.store.log import StoredCheckpoint

_json = msgspec.json.Encoder()

#: Entries one bundle holds at most: ~40 MB and a few seconds of the server's CPU.
MAX_BUNDLE_ENTRIES = 20_000


@dataclass(frozen=True)
class BundleLimits:
    max_entries: int = MAX_BUNDLE_ENTRIES
    in_flight: int = MAX_BUNDLE_ENTRIES  # entries of the bundles being made at once: one of the largest
    max_wait: float = 5.0  # seconds a request waits for room among them, then 503
    reuse_s: float = 30.0  # a bundle made for an agent and model is served again for this long
    kept_entries: int = MAX_BUNDLE_ENTRIES  # entries of the bundles kept for reuse, least recent out first


async def build_bundle(
    public: PublicService,
    store: AttestationStore,
    key: SigningKey,
    agent: str,
    model: str | None,
    *,
    checkpoint_wait: float = 5.0,
    max_entries: int = MAX_BUNDLE_ENTRIES,
    budget: WorkBudget | None = None,
) -> attestation.Bundle:
    """A verified bundle attesting ``agent``'s served rating under ``model`` (default model if None);
    TooLarge if it would hold more than ``max_entries``; its making holds its entries of ``budget``."""
    log = public.log
    regs = await log.store.registrations([key.id])
    if key.id not in regs or attestation.SIGNER_ROLE not in regs[key.id].roles:
        raise ConfigError(
            f"the service key {key.id} is not registered with the {attestation.SIGNER_ROLE} role"
        )
    rated = await public.rating(agent, model)
    weights = public.ratings.model(model)
    cp = await _checkpoint_covering(public, rated.log_size, checkpoint_wait)
    indexes = await entries_of(store, agent, weights.model_version, rated.log_size, key.id, max_entries)
    async with contextlib.nullcontext() if budget is None else budget.hold(len(indexes)):
        leaves = await store.leaves(indexes)
        if [i for i, _ in leaves] != indexes:
            raise NotFound(
                "some entries of the rating are missing from the log"
            )  # cannot happen: append-only
        ranges = {i: merkle.inclusion_proof_ranges(i, cp.size) for i in indexes}
        nodes = await log.store.nodes(merkle.required_nodes(r for rs in ranges.values() for r in rs))

        def signed() -> attestation.Bundle:  # the CPU-bound part, off the event loop
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
            return bundle

        return await asyncio.to_thread(signed)


async def entries_of(
    store: AttestationStore, agent: str, model: str, size: int, signer: str, max_entries: int | None = None
) -> list[int]:
    """The sorted log indexes ``agent``'s rating under ``model`` over [0, ``size``) is computed from;
    TooLarge if more than ``max_entries`` (counted up to there before they are read)."""
    if (
        max_entries is not None
        and await store.evidence_entry_count(agent, size, max_entries + 1) > max_entries
    ):
        raise _too_large(agent, max_entries)
    evidence = await store.evidence_entries(agent, size)
    # What weighted each third-party report: its reporter's newest reporter-model snapshot before it, the
    # first that rated it (how long it has had standing) and the operator's word on it as a marketplace.
    # The reporter is the entry's signer (a pooled item's issuer is the pool; evidence/standing.py).
    reports = await store.entry_signers(i for i, issuer in evidence if issuer is not None)
    found = {i for i, _ in evidence}
    found |= set(await store.snapshot_entries(agent, model, size))
    seen: set[tuple[int, str]] = set()
    while pending := set(reports) - seen:  # a reporter's vouch is a report whose reporter needs the same
        seen |= pending
        found |= set(await store.newest_snapshots_before(pending, REPORTER_MODEL))
        found |= set(await store.first_rated_snapshots_before(pending, REPORTER_MODEL, MIN_RATING))
        found |= set(
            await store.approvals_of({r for _, r in pending}, MARKETPLACE_APPROVAL.predicate_type, size)
        )
        vouches = await store.first_vouches_before(pending, (POOL_ISSUER, REVERIFY_ISSUER))
        found |= set(vouches)
        reports = [*reports, *await store.entry_signers(vouches)]
    ids = await store.signers(found) | {agent, signer} | {issuer for _, issuer in evidence if issuer}
    cards = await store.registration_entries(ids)
    if cards.get(signer, size) >= size:
        raise NotYetAvailable(f"the card of the service key {signer} is not yet among the rating's entries")
    # Cards from [size, ...) register keys that no entry below size needs (a card precedes its use).
    found |= {i for i in cards.values() if i < size}
    if max_entries is not None and len(found) > max_entries:
        raise _too_large(agent, max_entries)
    return sorted(found)


def _too_large(agent: str, max_entries: int) -> TooLarge:
    return TooLarge(
        f"the rating of {agent} is computed from more than {max_entries} log entries, more than a bundle "
        "holds; its evidence can be exported (trustscore evidence export) and the rating recomputed "
        "offline (trustscore score)"
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
    """A bundle as served: its encoded JSON, its attestation (for a credential) and how many entries."""

    at: float  # time.monotonic() when made
    attestation: dsse.Envelope
    body: bytes
    entries: int


class AttestationService:
    """Attestations of served ratings, as bundles or as W3C Verifiable Credentials."""

    def __init__(
        self,
        public: PublicService,
        store: AttestationStore,
        key: SigningKey,
        limits: BundleLimits | None = None,
    ) -> None:
        self.public = public
        self.store = store
        self.key = key
        self.limits = limits or BundleLimits()
        self._budget = WorkBudget(self.limits.in_flight, self.limits.max_wait, "bundle entries")
        self._made: OrderedDict[tuple[str, str], Made] = OrderedDict()
        self._kept = 0  # entries of the bundles in _made
        self._making: dict[tuple[str, str], asyncio.Future[Made]] = {}

    async def bundle_json(self, agent: str, model: str | None) -> bytes:
        """The JSON of a bundle of ``agent``'s served rating (:meth:`made`)."""
        return (await self.made(agent, model)).body

    async def bundle(self, agent: str, model: str | None) -> attestation.Bundle:
        return attestation.decode_bundle(await self.bundle_json(agent, model))

    async def credential(self, agent: str, model: str | None) -> dict[str, Any]:
        made = await self.made(agent, model)
        return attestation.rating_credential(attestation.parse_attestation(made.attestation), self.key)

    async def made(self, agent: str, model: str | None) -> Made:
        """A bundle of ``agent``'s served rating: one made within the last ``reuse_s`` seconds for the same
        agent and model (it names the rating it attests), else a new one, shared by every caller that
        asks while it is made (a caller that leaves does not stop it)."""
        key = (agent, self.public.ratings.model(model).model_version)  # an unknown model: NotFound here
        made = self._made.get(key)
        if made is not None and time.monotonic() - made.at <= self.limits.reuse_s:
            return made
        making = self._making.get(key)
        if making is None:
            making = self._making[key] = asyncio.ensure_future(self._make(key, agent, model))
            making.add_done_callback(lambda done: self._done(key, done))
        return await asyncio.shield(making)

    async def _make(self, key: tuple[str, str], agent: str, model: str | None) -> Made:
        bundle = await build_bundle(
            self.public,
            self.store,
            self.key,
            agent,
            model,
            max_entries=self.limits.max_entries,
            budget=self._budget,
        )
        body = await asyncio.to_thread(_json.encode, bundle)
        made = Made(time.monotonic(), bundle.attestation, body, len(bundle.entries))
        old = self._made.pop(key, None)
        self._kept -= 0 if old is None else old.entries
        self._made[key] = made
        self._kept += made.entries
        while self._kept > self.limits.kept_entries and len(self._made) > 1:  # the newest always stays
            self._kept -= self._made.popitem(last=False)[1].entries
        return made

    def _done(self, key: tuple[str, str], done: asyncio.Future[Made]) -> None:
        if self._making.get(key) is done:
            del self._making[key]
        if not done.cancelled():
            done.exception()  # read: a making every caller left does not log "never retrieved"
