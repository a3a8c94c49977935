"""Rating attestations: a served rating, signed by the server, checkable offline from a bundle.

``rating-attestation/v1`` states every published number of one agent's rating under one model (fixed
point: scores, coverage, confidence and effective sizes ×10^6, rounded half to even; totals are integers
already), the weights digest, the time it was computed at, the checkpoint it is anchored to and the log
indexes of every entry it was computed from. ``rating-attestation/v2`` (2026-12-07, what the server signs)
also names the versions of the derivation the evidence was derived under
(:data:`~trustscore.evidence.project_log.DERIVATION`), so that a verifier deriving otherwise, when a
number differs, says why it may. It is signed by the server's service key with the
``snapshot`` role, whose card (co-signed by the log key) is among those entries. Attestations are
standalone DSSE envelopes, never log entries: admission has no rule for the kind, so the log refuses it.

A **bundle** carries an attestation with the signed checkpoint and every listed entry with its inclusion
proof. :func:`verify_bundle` checks all of it with only the log's verifier key trusted, re-derives the
agent's evidence from the bundled entries and recomputes the rating with the named weights file; the first
number that differs is named. See docs/attestations.md. Pure: no I/O.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from trustscore import canonical
from trustscore.errors import InvalidInput, ProofError, SignatureError, TrustscoreError, VerificationError
from trustscore.evidence.derive import Context, derive, derive_snapshots, evidence_batch
from trustscore.evidence.project_log import DERIVATION
from trustscore.evidence.reporters import ReporterWeights
from trustscore.kinds import catalog, vc
from trustscore.kinds.admission import Registration, admit
from trustscore.kinds.parties import check_key_id, check_sha256_hex, new_nonce, now
from trustscore.kinds.snapshots import MAX_TOTAL
from trustscore.ledger import audit, dsse, keys, merkle, note, statements
from trustscore.ledger.checkpoint import Checkpoint, open_checkpoint
from trustscore.ledger.statements import Facts, Kind, ParsedStatement, Predicate, Statement, Subject, register
from trustscore.ledger.submission import check
from trustscore.scoring.inputs import DerivedEvidence, Snapshot
from trustscore.scoring.ratings import Rating, score_agents
from trustscore.scoring.weights import Weights

assert catalog.ALL_KINDS  # every log kind registered before bundled leaves are parsed

MICROS = 1_000_000
SIGNER_ROLE = "snapshot"  # the service role whose key signs attestations
MAX_SCORE_MICROS = 100 * MICROS  # dimension scores are 0..100
AGENT_URN = "urn:trustscore:agent:"
CREDENTIAL_TYPE = "TrustscoreRatingCredential"


def micros(x: float) -> int:
    """The fixed-point form of a published fraction or score: round half to even of ``x`` × 10^6."""
    return round(x * MICROS)


def _opt_micros(x: float | None) -> int | None:
    return None if x is None else micros(x)


class CheckpointRef(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    origin: str
    size: int
    root: str  # base64 of the 32-byte root hash


class DimensionStat(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    n: int
    n_eff_micros: int
    interval_micros: tuple[int, int] | None  # two-sided interval on 0..100, ×10^6


class AttestedUncertainty(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    level_micros: int
    n_eff_micros: int
    total_interval: tuple[int, int] | None
    dimensions: dict[str, DimensionStat]


class RatingNumbers(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    """Every published number of a rating, in fixed point; what recomputation must reproduce."""

    total: int | None
    adjusted: int | None
    grade: str | None
    coverage_micros: int
    confidence_micros: int | None
    n: int
    dimensions: dict[str, int | None]  # score ×10^6, null with a reason in null_reasons
    null_reasons: dict[str, str]
    uncertainty: AttestedUncertainty | None  # models with an [uncertainty] section only


class RatingAttestation(Predicate, kw_only=True, frozen=True):
    signer: str  # key id of the service key (role "snapshot") that signs
    agent: str
    model_version: str
    weights_digest: str  # SHA-256 hex of the weights file
    computed_at: str
    log_size: int  # the rating reflects entries [0, log_size)
    checkpoint: CheckpointRef  # size >= log_size; every listed entry is proven against it
    total: int | None
    adjusted: int | None
    grade: str | None
    coverage_micros: int
    confidence_micros: int | None
    n: int
    dimensions: dict[str, int | None]
    null_reasons: dict[str, str]
    uncertainty: AttestedUncertainty | None
    evidence_entries: list[int]  # sorted log indexes: evidence, snapshots and the cards of their signers

    def numbers(self) -> RatingNumbers:
        return RatingNumbers(**{f: getattr(self, f) for f in RatingNumbers.__struct_fields__})

    @property
    def derived_under(self) -> dict[str, str] | None:
        """The derivation's versions the attestation names (None: v1 names none)."""
        return None


class RatingAttestationV2(RatingAttestation, kw_only=True, frozen=True):
    """A v1 attestation that names the derivation's versions: ``{part: version}``, the reporter-standing
    policy and the work-record derivation, as rating responses name them."""

    derivation: dict[str, str]

    @property
    def derived_under(self) -> dict[str, str] | None:
        return self.derivation


#: Parts a derivation names at most (two today); each name and version is 1..200 printable characters.
MAX_DERIVATION_PARTS = 16


def rating_numbers(rating: Rating) -> RatingNumbers:
    """The fixed-point numbers of an engine :class:`Rating`."""
    u = rating.uncertainty
    uncertainty = None
    if u is not None:
        uncertainty = AttestedUncertainty(
            level_micros=micros(u.level),
            n_eff_micros=micros(u.n_eff),
            total_interval=u.total_interval,
            dimensions={
                name: DimensionStat(
                    n=s.n,
                    n_eff_micros=micros(s.n_eff),
                    interval_micros=None
                    if s.interval is None
                    else (micros(s.interval[0]), micros(s.interval[1])),
                )
                for name, s in u.dimensions.items()
            },
        )
    return RatingNumbers(
        total=rating.total,
        adjusted=rating.adjusted,
        grade=rating.grade,
        coverage_micros=micros(rating.coverage),
        confidence_micros=_opt_micros(rating.confidence),
        n=rating.n,
        dimensions={name: _opt_micros(score) for name, score in rating.dimensions.items()},
        null_reasons=dict(rating.null_reasons),
        uncertainty=uncertainty,
    )


def attestation_subject(a: RatingAttestation) -> Subject:
    """The agent, and the SHA-256 of what the rating was computed from (checkpoint, entries, weights)."""
    inputs = {
        "checkpoint": a.checkpoint,
        "evidence_entries": a.evidence_entries,
        "weights_digest": a.weights_digest,
    }
    return Subject(name=a.agent, digest={"sha256": hashlib.sha256(canonical.encode(inputs)).hexdigest()})


def _check_range(value: int | None, high: int, what: str) -> None:
    if value is not None and not 0 <= value <= high:
        raise InvalidInput(f"{what} must be 0..{high} or null")


def _check(stmt: Statement, a: RatingAttestation) -> Facts:
    check_key_id(a.signer, what="signer")
    check_key_id(a.agent, what="agent")
    if a.signer == a.agent:
        raise InvalidInput("a service key does not attest its own rating")
    statements.check_text(a.model_version, what="model_version")
    check_sha256_hex(a.weights_digest, what="weights_digest")
    statements.parse_time(a.computed_at, what="computed_at")
    statements.check_text(a.checkpoint.origin, what="checkpoint.origin")
    if len(canonical.b64decode(a.checkpoint.root, what="checkpoint.root")) != merkle.HASH_SIZE:
        raise InvalidInput("checkpoint.root must be a 32-byte hash")
    if not 0 <= a.log_size <= a.checkpoint.size:
        raise InvalidInput("log_size must be 0..checkpoint.size")
    _check_range(a.total, MAX_TOTAL, "total")
    _check_range(a.adjusted, MAX_TOTAL, "adjusted")
    _check_range(a.coverage_micros, MICROS, "coverage_micros")
    _check_range(a.confidence_micros, MICROS, "confidence_micros")
    if a.n < 0:
        raise InvalidInput("n must be >= 0")
    for name, score in a.dimensions.items():
        _check_range(score, MAX_SCORE_MICROS, f"dimensions.{name}")
    optional = {"total": a.total, "adjusted": a.adjusted, "grade": a.grade, "confidence": a.confidence_micros}
    nulls = [k for k, v in optional.items() if v is None]
    nulls += [f"dimensions.{name}" for name, score in a.dimensions.items() if score is None]
    if missing := [k for k in nulls if k not in a.null_reasons]:
        raise InvalidInput(f"{missing[0]} is null without a reason in null_reasons")
    if any(not 0 <= i < a.log_size for i in a.evidence_entries) or any(
        x >= y for x, y in itertools.pairwise(a.evidence_entries)
    ):
        raise InvalidInput("evidence_entries must be increasing log indexes below log_size")
    if stmt.subject != [attestation_subject(a)]:
        raise InvalidInput("attestation subject must be the agent and the SHA-256 of its inputs")
    return Facts(signer=a.signer, subject=a.agent)


def _check_v2(stmt: Statement, a: RatingAttestationV2) -> Facts:
    if not 0 < len(a.derivation) <= MAX_DERIVATION_PARTS:
        raise InvalidInput(f"derivation must name 1..{MAX_DERIVATION_PARTS} parts")
    for part, version in a.derivation.items():
        statements.check_text(part, what="derivation part")
        statements.check_text(version, what=f"derivation.{part}")
    return _check(stmt, a)


RATING_ATTESTATION_V1 = register(
    Kind(name="rating-attestation", version=1, struct=RatingAttestation, check=_check)
)
RATING_ATTESTATION = register(
    Kind(name="rating-attestation", version=2, struct=RatingAttestationV2, check=_check_v2)
)


def _named(derivation: dict[str, str]) -> str:
    return ", ".join(f"{part} {version}" for part, version in sorted(derivation.items()))


def make_rating_attestation(
    rating: Rating,
    *,
    signer: str,
    computed_at: dt.datetime,
    log_size: int,
    checkpoint: Checkpoint,
    evidence_entries: Iterable[int],
    nonce: str | None = None,
    issued_at: str | None = None,
) -> bytes:
    """Checked statement bytes attesting ``rating``; sign with the service key (role ``snapshot``)."""
    a = RatingAttestationV2(
        nonce=nonce or new_nonce(),
        issued_at=issued_at or now(),
        signer=signer,
        agent=rating.agent,
        model_version=rating.model_version,
        weights_digest=rating.weights_digest,
        computed_at=statements.format_time(computed_at),
        log_size=log_size,
        checkpoint=CheckpointRef(
            origin=checkpoint.origin, size=checkpoint.size, root=canonical.b64encode(checkpoint.root)
        ),
        evidence_entries=sorted(set(evidence_entries)),
        derivation=dict(DERIVATION),
        **msgspec.structs.asdict(rating_numbers(rating)),
    )
    payload = statements.make_statement(RATING_ATTESTATION, attestation_subject(a), a)
    statements.parse_statement(payload)
    return payload


def parse_attestation(envelope: dsse.Envelope) -> RatingAttestation:
    """The predicate of an attestation envelope (structure only; signatures are checked elsewhere)."""
    payload = canonical.b64decode(envelope.payload, what="attestation payload")
    parsed = statements.parse_statement(payload)
    if not isinstance(parsed.predicate, RatingAttestation):
        raise InvalidInput(f"not a rating attestation but a {parsed.kind.name} statement")
    return parsed.predicate


# --- comparing numbers ----------------------------------------------------------------------------------


def _flatten(value: Any, path: str) -> Iterable[tuple[str, Any]]:
    if isinstance(value, dict):
        for key in value:
            yield from _flatten(value[key], f"{path}.{key}" if path else key)
    else:
        yield path, value


def compare_numbers(attested: RatingNumbers, recomputed: RatingNumbers) -> None:
    """Return if every number agrees; else raise naming the first that differs (``total: attested 612,
    recomputed 598``)."""
    a = dict(_flatten(msgspec.to_builtins(attested), ""))
    r = dict(_flatten(msgspec.to_builtins(recomputed), ""))
    for path in [*a, *(p for p in r if p not in a)]:
        if a.get(path, "absent") != r.get(path, "absent"):
            shown = [msgspec.json.encode(x.get(path)).decode() if path in x else "absent" for x in (a, r)]
            raise VerificationError(
                f"{path}: attested {shown[0]}, recomputed {shown[1]}",
                path=path,
                attested=a.get(path),
                recomputed=r.get(path),
            )


# --- bundles ---------------------------------------------------------------------------------------------


class BundleEntry(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    index: int
    leaf: str  # base64 of the exact leaf bytes
    proof: list[str]  # base64 inclusion proof hashes at the checkpoint's size


class Bundle(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    attestation: dsse.Envelope
    log_verifier_key: str
    checkpoint: str  # the signed checkpoint note
    entries: list[BundleEntry]
    weights_model: str


def make_bundle(
    attestation: dsse.Envelope,
    *,
    log_verifier_key: str,
    checkpoint_note: str,
    entries: Sequence[tuple[int, bytes, Sequence[bytes]]],
    weights_model: str,
) -> Bundle:
    """A bundle from an attestation, the signed checkpoint and (index, leaf, proof) of every entry."""
    return Bundle(
        attestation=attestation,
        log_verifier_key=log_verifier_key,
        checkpoint=checkpoint_note,
        entries=[
            BundleEntry(index, canonical.b64encode(leaf), [canonical.b64encode(h) for h in proof])
            for index, leaf, proof in sorted(entries, key=lambda e: e[0])
        ],
        weights_model=weights_model,
    )


def decode_bundle(data: bytes) -> Bundle:
    try:
        return msgspec.json.decode(data, type=Bundle)
    except msgspec.DecodeError as exc:
        raise InvalidInput(f"not a rating attestation bundle: {exc}") from exc


@dataclass(frozen=True)
class VerifiedBundle:
    """What a bundle proves: the attestation, its checkpoint, its signer, and the recomputed rating."""

    attestation: RatingAttestation
    checkpoint: Checkpoint
    signer: str
    rating: Rating

    def summary(self) -> dict[str, Any]:
        """What every verifier reports (CLI ``rating verify --json``, the MCP ``verify_attestation``)."""
        a = self.attestation
        return {
            "verified": True,
            "agent": a.agent,
            "model_version": a.model_version,
            "computed_at": a.computed_at,
            "signer": self.signer,
            "checkpoint_size": self.checkpoint.size,
            "entries_proven": len(a.evidence_entries),
            "derivation": a.derived_under,
            "verifier_derivation": dict(DERIVATION),
            "total": a.total,
            "grade": a.grade,
            "n": a.n,
        }


def verify_bundle(bundle: Bundle, weights: Weights, trusted: note.Verifier | None = None) -> VerifiedBundle:
    """Check a bundle trusting only the log's verifier key (``trusted``, else the one the bundle names).

    In order: the checkpoint's signature; every entry's inclusion proof; every entry's signatures and
    admission, replayed in log order from the bundled cards; the attestation's signature by a service key
    with the ``snapshot`` role registered among them; that the bundle holds exactly the listed entries;
    that the weights file is the attested one; and that recomputing the rating gives every attested number.
    """
    verifier = note.parse_verifier_key(bundle.log_verifier_key)
    if trusted is not None and trusted != verifier:
        raise VerificationError(
            f"the bundle names log key {bundle.log_verifier_key}, not the trusted {trusted.key()}"
        )
    cp = open_checkpoint(bundle.checkpoint, verifier, None)
    leaves = _proven_leaves(bundle.entries, cp)
    a = parse_attestation(bundle.attestation)
    _check_anchoring(a, cp, bundle, weights)
    registry, parsed = _replay(leaves, verifier.public_key)
    signer = _check_attestation_signature(bundle.attestation, a, registry)
    listed, bundled = set(a.evidence_entries), {i for i, _ in leaves}
    if missing := sorted(listed - bundled):
        raise VerificationError(
            f"entry {missing[0]} is listed in evidence_entries but missing from the bundle"
        )
    if extra := sorted(bundled - listed):
        raise VerificationError(f"entry {extra[0]} is in the bundle but not listed in evidence_entries")
    rating = recompute(parsed, a.agent, weights, statements.parse_time(a.computed_at, what="computed_at"))
    try:
        compare_numbers(a.numbers(), rating_numbers(rating))
    except VerificationError as exc:  # a derivation of another release: say so (it may be why)
        if a.derived_under is None or a.derived_under == DERIVATION:
            raise
        raise VerificationError(
            f"{exc.message}; the attested evidence was derived under {_named(a.derived_under)}, this "
            f"verifier derives under {_named(DERIVATION)}: verify it with a release that derives under the "
            "attested versions"
        ) from exc
    return VerifiedBundle(attestation=a, checkpoint=cp, signer=signer, rating=rating)


def _proven_leaves(entries: Sequence[BundleEntry], cp: Checkpoint) -> list[tuple[int, bytes]]:
    indexes = [e.index for e in entries]
    if any(x >= y for x, y in itertools.pairwise(indexes)):
        raise InvalidInput("bundle entries must be in increasing index order, each index once")
    out = []
    for e in entries:
        if not 0 <= e.index < cp.size:
            raise ProofError(f"entry {e.index} is outside checkpoint {cp.size}")
        leaf = canonical.b64decode(e.leaf, what=f"entry {e.index} leaf")
        proof = [canonical.b64decode(h, what=f"entry {e.index} proof") for h in e.proof]
        try:
            merkle.verify_inclusion(merkle.leaf_hash(leaf), e.index, cp.size, proof, cp.root)
        except (ProofError, InvalidInput) as exc:
            raise ProofError(
                f"entry {e.index}: inclusion proof does not verify against checkpoint {cp.size}: {exc.message}"
            ) from exc
        out.append((e.index, leaf))
    return out


def _check_anchoring(a: RatingAttestation, cp: Checkpoint, bundle: Bundle, weights: Weights) -> None:
    anchored = CheckpointRef(origin=cp.origin, size=cp.size, root=canonical.b64encode(cp.root))
    if a.checkpoint != anchored:
        raise VerificationError(
            f"the attestation names checkpoint {a.checkpoint.size} of {a.checkpoint.origin!r}, "
            f"not the bundled checkpoint {cp.size} of {cp.origin!r}"
        )
    if bundle.weights_model != a.model_version:
        raise VerificationError(
            f"weights_model {bundle.weights_model!r} is not the attested {a.model_version!r}"
        )
    if weights.model_version != a.model_version:
        raise VerificationError(
            f"the weights file is {weights.model_version}, not the attested {a.model_version}"
        )
    if weights.digest != a.weights_digest:
        raise VerificationError(
            f"weights_digest: attested {a.weights_digest}, the weights file's sha256 is {weights.digest}"
        )


def _replay(
    leaves: Sequence[tuple[int, bytes]], log_public_key: bytes
) -> tuple[dict[str, Registration], list[tuple[int, ParsedStatement]]]:
    """Verify every leaf's signatures and admission in log order, registering keys from bundled cards."""
    log_id = keys.key_id(log_public_key)
    registry: dict[str, Registration] = {}

    def resolve(kid: str) -> bytes | None:
        if kid == log_id:
            return log_public_key
        reg = registry.get(kid)
        return None if reg is None else reg.public_key

    parsed = []
    for index, leaf in leaves:
        try:
            prepared = audit.parse_leaf(leaf)
            checked = check(prepared, resolve)
            signers = [s.keyid for s in prepared.envelope.signatures]
            reg = admit(checked.statement, signers, registry.get, log_id)
        except TrustscoreError as exc:
            raise VerificationError(f"entry {index}: {exc.message}") from exc
        if reg is not None:
            registry.setdefault(reg.id, reg)
        parsed.append((index, checked.statement))
    return registry, parsed


def _check_attestation_signature(
    envelope: dsse.Envelope, a: RatingAttestation, registry: dict[str, Registration]
) -> str:
    reg = registry.get(a.signer)
    if reg is None or reg.kind != "service":
        raise VerificationError(
            f"attestation signer {a.signer} is not a service key registered by a bundled card "
            "co-signed by the log key"
        )
    if SIGNER_ROLE not in reg.roles:
        raise VerificationError(f"attestation signer {a.signer} has no {SIGNER_ROLE} role")
    try:
        verified = dsse.verify_envelope(
            envelope, lambda kid: registry[kid].public_key if kid in registry else None
        )
    except TrustscoreError as exc:
        raise SignatureError(f"attestation: {exc.message}") from exc
    if a.signer not in verified.signer_ids:
        raise SignatureError(f"attestation: not signed by its signer {a.signer}")
    return a.signer


def recompute(
    entries: Iterable[tuple[int, ParsedStatement]], agent: str, weights: Weights, at: dt.datetime
) -> Rating:
    """``agent``'s rating from admitted ``entries`` (in log order), as the server computes it.

    Reports (settlements, marketplace events) are weighted by their reporter's newest snapshot row among
    the entries logged before them, as :class:`ReporterWeights` decides, and pass the reporter-standing
    policy (:mod:`trustscore.evidence.standing`) as the projection applies it; the agent's own snapshots
    of the model feed reliability where the model reads them (``[reliability] use_snapshots``).
    """
    reporters = ReporterWeights()
    context = Context(reporter_weight=reporters.weight)
    evidence: list[DerivedEvidence] = []
    snapshots: list[Snapshot] = []
    for index, stmt in entries:
        evidence += [d for d in derive(index, stmt, context) if d.agent == agent]
        snapshots += [
            s for s in derive_snapshots(stmt) if s.agent == agent and s.model_version == weights.model_version
        ]
        reporters.feed(index, stmt)  # as the projection does: only the reporter model's snapshots count
        context.standing.feed(index, stmt)  # and the reporter-standing policy (evidence/standing.py)
    [rating] = score_agents(evidence_batch(evidence), snapshots, weights, at, agents=[agent])
    return rating


# --- the W3C Verifiable Credential form ------------------------------------------------------------------


def rating_credential(a: RatingAttestation, key: keys.SigningKey) -> dict[str, Any]:
    """The attestation as a VC 2.0 with an ``eddsa-jcs-2022`` proof by ``key`` (the attestation's signer).

    Numbers stay fixed-point integers, so JCS needs no ECMAScript float formatting.
    """
    if key.id != a.signer:
        raise InvalidInput(f"the credential must be signed by the attestation's signer {a.signer}")
    subject = msgspec.to_builtins(a)
    for field in ("nonce", "issued_at", "signer"):
        del subject[field]
    credential = {
        "@context": [vc.CREDENTIALS_V2],
        "type": ["VerifiableCredential", CREDENTIAL_TYPE],
        "issuer": vc.did_key(key.public_key),
        "validFrom": a.computed_at,
        "credentialSubject": {"id": AGENT_URN + a.agent, **subject},
    }
    return vc.sign_credential(credential, key, created=a.issued_at)


def verify_rating_credential(
    credential: dict[str, Any], issuer_public_key: bytes | None = None
) -> dict[str, Any]:
    """Verify a rating credential's proof (and that its issuer is the proof's key); return it unsecured."""
    if credential.get("type") != ["VerifiableCredential", CREDENTIAL_TYPE]:
        raise InvalidInput(f"not a {CREDENTIAL_TYPE}")
    document = vc.verify_credential(credential, issuer_public_key)
    subject = document.get("credentialSubject")
    if not isinstance(subject, dict) or subject.get("id") != AGENT_URN + str(subject.get("agent")):
        raise InvalidInput(f"credentialSubject.id must be {AGENT_URN}<agent>")
    return document
