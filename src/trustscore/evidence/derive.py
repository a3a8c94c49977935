"""The deterministic mapping from log statements to scoring evidence (docs/evidence-mapping.md).

Pure: the output depends only on the statement, its log index and a :class:`Context` that is itself
derived from the log (reporter weights from earlier rating snapshots, and the reporter-standing policy's
state, :mod:`trustscore.evidence.standing`, fed in log order). Which statements are admitted
(a graded-evidence signer is the configured grader key, an event signer's card has the marketplace
role, settlement parties are not under one controller) is the caller's decision, made before ``derive``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import msgspec

from trustscore.errors import UnsupportedKind
from trustscore.evidence.reporters import ReporterWeights, no_snapshots
from trustscore.evidence.standing import POOL_ISSUER, Standing, vouches
from trustscore.exams import sitting_evidence
from trustscore.kinds.approvals import MARKETPLACE_APPROVAL
from trustscore.kinds.cards import AGENT_CARD, AGENT_CARD_V2
from trustscore.kinds.events import Event, EventName
from trustscore.kinds.graded import GradedEvidence
from trustscore.kinds.parties import PARTY_CARD
from trustscore.kinds.reverification import Reverification
from trustscore.kinds.scope_run import SCOPE_RUN
from trustscore.kinds.service_card import SERVICE_CARD
from trustscore.kinds.settlements import Settlement
from trustscore.kinds.sittings import SittingClose
from trustscore.kinds.snapshots import RATING_SNAPSHOT, RatingSnapshot
from trustscore.kinds.work_records import WorkRecord
from trustscore.ladder import work_evidence as work
from trustscore.ledger.statements import PREDICATE_PREFIX, ParsedStatement, parse_time
from trustscore.reverify.evidence import PRIVATE_KEY, derive_reverification, is_asked, is_gap, lower_key
from trustscore.scoring.inputs import DerivedEvidence, EvidenceBatch, Result, Snapshot

#: Kinds that carry no evidence items (cards register keys; snapshots feed ``derive_snapshots``; an exam
#: report counts only once the server's graded evidence for it is logged).
NO_EVIDENCE = frozenset(
    {
        AGENT_CARD.predicate_type,
        AGENT_CARD_V2.predicate_type,
        PARTY_CARD.predicate_type,
        SERVICE_CARD.predicate_type,
        RATING_SNAPSHOT.predicate_type,
        MARKETPLACE_APPROVAL.predicate_type,
        SCOPE_RUN.predicate_type,  # feeds the scope-honesty score, not the dimensions
        f"{PREDICATE_PREFIX}exam-report/v1",
        f"{PREDICATE_PREFIX}subscription/v1",  # webhooks (docs/webhooks.md): no evidence about anyone
        f"{PREDICATE_PREFIX}subscription-revocation/v1",
    }
)

_VALUE: dict[Result, float] = {"success": 1.0, "partial": 0.5, "failure": 0.0}
_DELIVERY: dict[str, Result] = {"pass": "success", "late": "partial", "fail": "failure"}
# The published methodology's buyer-side rule: a failed payment is partial, not failure.
_PAYMENT: dict[str, Result] = {"pass": "success", "fail": "partial"}
_EVENTS: dict[EventName, tuple[str, Result, str]] = {  # event -> (dimension, result, source)
    "delivered": ("delivery", "success", "real"),
    "rejected": ("delivery", "failure", "real"),
    "confirmed": ("economic", "success", "real-confidential"),
    "delivery_failed": ("reliability", "failure", "real"),
    "negotiation_expired": ("negotiation", "failure", "real"),
    "signature_invalid": ("integrity", "failure", "real"),
}


@dataclass(frozen=True)
class Context:
    """What derivation needs beyond the statement, all derived from the log.

    ``reporter_weight(reporter, before_index)`` is the extra weight of a counterparty's report logged at
    ``before_index`` (:meth:`ReporterWeights.weight`); by default every reporter is unrated (0.5).
    ``standing`` is the reporter-standing policy's state (fed the same snapshots and the operator's
    marketplace approvals); derivation updates it as it goes, so one context serves one log in order.
    """

    reporter_weight: Callable[[str, int], float] = field(default=no_snapshots)
    standing: Standing = field(default_factory=Standing)


def derive(entry_index: int, statement: ParsedStatement, context: Context) -> list[DerivedEvidence]:
    """The evidence items of the admitted statement logged at ``entry_index``, in a fixed order."""
    p = statement.predicate
    if isinstance(p, GradedEvidence):
        return _standing(_graded(entry_index, p), context)
    if isinstance(p, Settlement):
        return _by_standing(p.reporter, entry_index, _settlement(entry_index, p, context), context)
    if isinstance(p, Event):
        return _by_standing(p.marketplace, entry_index, [_event(entry_index, p, context)], context)
    if isinstance(p, WorkRecord):  # docs/evidence-ladder.md
        items = work.derive_work_record(entry_index, p, context.reporter_weight)
        if p.attestation == "self":  # the agent's own word (or its interest's): never standing (standing-v2)
            return _pooled(items, context)
        return _by_standing(p.reporter, entry_index, items, context)
    if isinstance(p, Reverification):
        return _standing(
            _asked_spaced(entry_index, derive_reverification(entry_index, statement), context), context
        )
    if statement.kind.name in sitting_evidence.SITTING_KINDS:  # the server's own grades of a sitting
        return _standing(_spaced(entry_index, statement, context), context)
    if statement.kind.predicate_type in NO_EVIDENCE:
        return []
    raise UnsupportedKind(f"no evidence mapping for {statement.kind.predicate_type}")


def _standing(items: list[DerivedEvidence], context: Context) -> list[DerivedEvidence]:
    """Standing evidence: counted as it is, and counted towards the pool's budget."""
    for d in items:
        context.standing.observe(d.agent, d.dimension, d.key, d.source, d.extra_weight, d.at)
    return items


def _spaced(index: int, statement: ParsedStatement, context: Context) -> list[DerivedEvidence]:
    """A sitting close's items weighted by how long after the agent's sittings in each dimension that had
    closed before it opened it closed (standing-v3, :meth:`Standing.sitting_weight`); those weighing 0
    are dropped."""
    items = sitting_evidence.derive_sitting(index, statement)
    if not items:
        return items
    assert isinstance(statement.predicate, SittingClose)
    opened = statement.predicate.sitting
    out = []
    for d in items:
        weight = context.standing.sitting_weight(d.agent, d.dimension, index, opened, d.at)
        if weight > 0.0:
            out.append(
                d if weight == 1.0 else msgspec.structs.replace(d, extra_weight=d.extra_weight * weight)
            )
    return out


def _asked_spaced(index: int, items: list[DerivedEvidence], context: Context) -> list[DerivedEvidence]:
    """A re-verification run's answers to the items it asked, weighted by the time since the agent's
    previous run with such items in the dimension (:meth:`Standing.fresh_weight`; fresh instances since
    standing-v4, items of the private sets since standing-v5); those weighing 0 are dropped. Of the answers
    to a private item only the agent's first and one later, lower one count
    (:meth:`Standing.private_answer`), and a private-gap success only while no gap failure was derived for
    the exam version (:meth:`Standing.gap`). Its other integrity items are as they were."""
    out = []
    for d in items:
        which = None
        if is_gap(d.issuer, d.key):
            assert d.key is not None
            if not context.standing.gap(d.agent, d.key, d.result == "failure"):
                continue
        elif is_asked(d.issuer, d.key):
            assert d.key is not None
            if d.key.startswith(PRIVATE_KEY):
                which = context.standing.private_answer(d.agent, d.key, d.value)
                if which is None:
                    continue
            weight = context.standing.fresh_weight(d.agent, d.dimension, index, d.at)
            if weight <= 0.0:
                continue
            if which is not None:
                context.standing.answered(d.agent, d.key, d.value, which)
                if which == "lower":
                    d = msgspec.structs.replace(d, key=lower_key(d.key))
            if weight != 1.0:
                d = msgspec.structs.replace(d, extra_weight=d.extra_weight * weight)
        out.append(d)
    return out


def _by_standing(
    reporter: str, index: int, items: list[DerivedEvidence], context: Context
) -> list[DerivedEvidence]:
    """A reporter with standing counts as it is (and, if it is an approved marketplace, vouches for the
    subject); one without goes to the subject's pool (docs/methodology.md, "Reporter standing")."""
    if context.standing.has_standing(reporter, index):
        if context.standing.approved(reporter, index):  # only the operator's marketplaces vouch (v2),
            for d in items:  # with a delivery they report
                if vouches(d):
                    context.standing.vouch(d.agent, index, reporter)
        return _standing(items, context)
    return _pooled(items, context)


def _pooled(items: list[DerivedEvidence], context: Context) -> list[DerivedEvidence]:
    """``items`` in their subjects' pools: scaled to the room left, dated no later than the newest standing
    item, issuer :data:`POOL_ISSUER`, dropped when no room is left."""
    out = []
    for d in items:
        pooled = context.standing.pool(d.agent, d.dimension, d.source, d.extra_weight, d.at)
        if pooled is not None:
            extra, at = pooled
            out.append(msgspec.structs.replace(d, extra_weight=extra, at=at, issuer=POOL_ISSUER))
    return out


def derive_snapshots(statement: ParsedStatement) -> list[Snapshot]:
    """The engine's snapshots of a rating snapshot (one per row, ``total`` as published); else none."""
    s = statement.predicate
    if not isinstance(s, RatingSnapshot):
        return []
    at = parse_time(s.taken_at, what="taken_at")
    return [Snapshot(agent=r.agent, at=at, total=r.total, model_version=s.model_version) for r in s.ratings]


def _graded(index: int, g: GradedEvidence) -> list[DerivedEvidence]:
    at = parse_time(g.graded_at, what="graded_at")
    source = "real-benchmark" if g.tier == "public" else "verified"
    return [
        DerivedEvidence(
            index=index,
            agent=g.agent,
            dimension=item.dimension,
            source=source,
            at=at,
            value=item.value_millis / 1000,
            result=item.result,
            key=f"exam:{g.exam}@{g.exam_version}:{item.item_id}",
            issuer=None,
        )
        for item in g.items
    ]


def _settlement(index: int, s: Settlement, context: Context) -> list[DerivedEvidence]:
    outcomes: list[tuple[str, Result]] = []
    if s.delivery is not None:
        outcomes.append(("delivery", _DELIVERY[s.delivery]))
    if s.payment is not None:
        outcomes.append(("reliability", _PAYMENT[s.payment]))
    if s.confirmed:
        outcomes.append(("economic", "success"))
    reporter = s.reporter
    at = parse_time(s.settled_at, what="settled_at")
    weight = context.reporter_weight(reporter, index)
    source = "real-confidential" if s.confidential else "real"
    return [
        DerivedEvidence(
            index=index,
            agent=s.about,
            dimension=dimension,
            source=source,
            at=at,
            value=_VALUE[result],
            result=result,
            key=f"settlement:{reporter}:{s.deal_id}:{dimension}",
            issuer=reporter,
            extra_weight=weight,
        )
        for dimension, result in outcomes
    ]


def _event(index: int, e: Event, context: Context) -> DerivedEvidence:
    """A marketplace's word counts like a counterparty's: weighted by the marketplace's own rating."""
    dimension, result, source = _EVENTS[e.event]
    return DerivedEvidence(
        index=index,
        agent=e.agent,
        dimension=dimension,
        source=source,
        at=parse_time(e.occurred_at, what="occurred_at"),
        value=_VALUE[result],
        result=result,
        key=f"event:{e.marketplace}:{e.ref}:{dimension}",
        issuer=e.marketplace,
        extra_weight=context.reporter_weight(e.marketplace, index),
    )


class DerivedLog(msgspec.Struct, frozen=True, kw_only=True):
    """Everything a log (prefix) says for scoring: evidence and snapshots, in log order."""

    evidence: list[DerivedEvidence]
    snapshots: list[Snapshot]


def derive_log(
    entries: Iterable[tuple[int, ParsedStatement]], standing: Standing | None = None
) -> DerivedLog:
    """Derive admitted ``entries`` (index, statement) in increasing index order, feeding each rating
    snapshot to the reporter weights and the standing policy as it passes, so every settlement is weighted
    as of its index. ``standing``: the policy state to start from (default: that of an empty log)."""
    weights = ReporterWeights()
    context = Context(reporter_weight=weights.weight, standing=standing or Standing())
    evidence: list[DerivedEvidence] = []
    snapshots: list[Snapshot] = []
    for index, statement in entries:
        evidence.extend(derive(index, statement, context))
        snapshots.extend(derive_snapshots(statement))
        weights.feed(index, statement)
        context.standing.feed(index, statement)
    return DerivedLog(evidence=evidence, snapshots=snapshots)


def evidence_batch(evidence: Sequence[DerivedEvidence]) -> EvidenceBatch:
    """The engine's batch of ``evidence`` with each statement's log index as ``seq`` (later wins a tie)."""
    return EvidenceBatch.from_items([d.to_item() for d in evidence], seq=[d.index for d in evidence])
