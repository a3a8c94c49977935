"""Signed rating attestations: the served rating, the entries it was computed from, and their proofs.

The rating is the one ``GET /v1/agents/{id}/rating`` serves. Its entries are the agent's evidence and
snapshot entries, the newest reporter snapshot before each report by a third party (what weighted it), and the card of
every key needed to check them; each is proven against the latest checkpoint, which must cover the
rating's log size. Before a bundle leaves the server it is verified exactly as ``trustscore rating
verify`` would, so the server never signs a rating it cannot reproduce. See docs/attestations.md.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from trustscore.attestations import rating as attestation
from trustscore.errors import ConfigError, NotFound, NotYetAvailable, TrustscoreError
from trustscore.evidence.reporters import REPORTER_MODEL
from trustscore.evidence.standing import MIN_RATING, POOL_ISSUER
from trustscore.kinds.approvals import MARKETPLACE_APPROVAL
from trustscore.ledger import dsse, merkle, note
from trustscore.ledger.checkpoint import Checkpoint
from trustscore.ledger.keys import SigningKey
from trustscore.reverify.evidence import ISSUER as REVERIFY_ISSUER
from trustscore.services.public import PublicService
from trustscore.store.attestations import AttestationStore
from trustscore.store.log import StoredCheckpoint


async def build_bundle(
    public: PublicService,
    store: AttestationStore,
    key: SigningKey,
    agent: str,
    model: str | None,
    *,
    checkpoint_wait: float = 5.0,
) -> attestation.Bundle:
    """A verified bundle attesting ``agent``'s served rating under ``model`` (default model if None)."""
    log = public.log
    regs = await log.store.registrations([key.id])
    if key.id not in regs or attestation.SIGNER_ROLE not in regs[key.id].roles:
        raise ConfigError(
            f"the service key {key.id} is not registered with the {attestation.SIGNER_ROLE} role"
        )
    rated = await public.rating(agent, model)
    weights = public.ratings.model(model)
    cp = await _checkpoint_covering(public, rated.log_size, checkpoint_wait)
    indexes = await entries_of(store, agent, weights.model_version, rated.log_size, key.id)
    leaves = await store.leaves(indexes)
    if [i for i, _ in leaves] != indexes:
        raise NotFound("some entries of the rating are missing from the log")  # cannot happen: append-only
    ranges = {i: merkle.inclusion_proof_ranges(i, cp.size) for i in indexes}
    nodes = await log.store.nodes(merkle.required_nodes(r for rs in ranges.values() for r in rs))
    try:
        proofs = {i: merkle.assemble(rs, nodes) for i, rs in ranges.items()}
    except KeyError as exc:
        raise NotYetAvailable("proof nodes are not integrated yet") from exc
    checkpoint = Checkpoint(log.origin, cp.size, cp.root)
    payload = attestation.make_rating_attestation(
        rated.rating,
        signer=key.id,
        computed_at=rated.at,
        log_size=rated.log_size,
        checkpoint=checkpoint,
        evidence_entries=indexes,
    )
    bundle = attestation.make_bundle(
        dsse.sign(payload, [key]),
        log_verifier_key=log.verifier_key,
        checkpoint_note=cp.signed_note,
        entries=[(i, leaf, proofs[i]) for i, leaf in leaves],
        weights_model=weights.model_version,
    )
    trusted = note.parse_verifier_key(log.verifier_key)
    try:
        await asyncio.to_thread(attestation.verify_bundle, bundle, weights, trusted)
    except TrustscoreError as exc:
        raise TrustscoreError(f"the attestation of {agent} does not reproduce: {exc.message}") from exc
    return bundle


async def entries_of(store: AttestationStore, agent: str, model: str, size: int, signer: str) -> list[int]:
    """The sorted log indexes ``agent``'s rating under ``model`` over [0, ``size``) is computed from."""
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
    return sorted(found)


async def _checkpoint_covering(public: PublicService, size: int, wait: float) -> StoredCheckpoint:
    deadline = time.monotonic() + wait
    while True:
        cp = await public.log.latest_checkpoint(fresh=True)
        if cp.size >= size:
            return cp
        if time.monotonic() >= deadline:
            raise NotYetAvailable(f"no checkpoint covers the rating's log size {size} yet (latest {cp.size})")
        await asyncio.sleep(0.05)


class AttestationService:
    """Attestations of served ratings, as bundles or as W3C Verifiable Credentials."""

    def __init__(self, public: PublicService, store: AttestationStore, key: SigningKey) -> None:
        self.public = public
        self.store = store
        self.key = key

    async def bundle(self, agent: str, model: str | None) -> attestation.Bundle:
        return await build_bundle(self.public, self.store, self.key, agent, model)

    async def credential(self, agent: str, model: str | None) -> dict[str, Any]:
        bundle = await self.bundle(agent, model)
        return attestation.rating_credential(attestation.parse_attestation(bundle.attestation), self.key)
