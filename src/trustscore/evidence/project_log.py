"""From log entries to what ratings read: cards, evidence and snapshots. Pure and incremental.

The server's projector and the offline export both run :func:`project` over entries in log order,
so the evidence a rating was computed from can be re-derived by anyone from the log. Offline
(``verify=True``) every entry's signatures and admission rules are re-checked; the server, which
checked both at ingest, may skip that.

Reporter weights follow the rating snapshots of one model only
(:data:`trustscore.evidence.reporters.REPORTER_MODEL`).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

from trustscore.errors import TrustscoreError
from trustscore.evidence.derive import Context, derive, derive_snapshots
from trustscore.evidence.reporters import REPORTER_MODEL as REPORTER_MODEL
from trustscore.evidence.reporters import ReporterWeights
from trustscore.evidence.standing import POLICY_VERSION, POOL_ISSUER, Standing, vouches
from trustscore.exams.sitting_evidence import KEY_PREFIX as SITTING_KEY
from trustscore.kinds import catalog
from trustscore.kinds.admission import Registration, admit, registration_of
from trustscore.kinds.approvals import MarketplaceApproval
from trustscore.kinds.snapshots import RatingSnapshot
from trustscore.ladder import work_evidence as work
from trustscore.ladder.rows import VERSION as LADDER_ROWS_VERSION
from trustscore.ladder.rows import LadderRow, ladder_rows
from trustscore.ladder.rule import CURRENT_RULE
from trustscore.ledger import audit, keys
from trustscore.ledger.submission import check
from trustscore.reverify.evidence import ISSUER as REVERIFY_ISSUER
from trustscore.reverify.evidence import LOWER_KEY, PRIVATE_KEY, first_key, is_asked, is_gap
from trustscore.scoring.inputs import DerivedEvidence, EvidenceItem, Snapshot

assert catalog.ALL_KINDS  # every kind registered before any entry is parsed

#: The versions of what derivation does (part -> version), named in rating responses and exports. A server
#: records them with the evidence it stores and, started on evidence derived under others, derives it all
#: again from the log (``store.projection_tables.rederive``), so that what it serves is what anyone
#: derives offline.
DERIVATION: Final = {"standing": POLICY_VERSION, "work_evidence": work.VERSION}
#: What a database records its projection was derived under: the evidence's versions (:data:`DERIVATION`,
#: which rating attestations name) and the ladder rows' (which no rating depends on).
RECORDED: Final = {**DERIVATION, "ladder_rows": LADDER_ROWS_VERSION}


@dataclass(frozen=True)
class SnapshotRow:
    index: int
    snapshot: Snapshot
    adjusted: int | None


@dataclass
class Projected:
    """What a run of entries adds."""

    evidence: list[DerivedEvidence] = field(default_factory=list)
    snapshots: list[SnapshotRow] = field(default_factory=list)
    rejected: list[tuple[int, str]] = field(default_factory=list)  # offline: entries that do not count
    ladder: list[LadderRow] = field(
        default_factory=list
    )  # every evidence item's rung (docs/evidence-ladder.md)

    @property
    def agents(self) -> set[str]:
        return {e.agent for e in self.evidence} | {s.snapshot.agent for s in self.snapshots}


@dataclass
class ProjectionState:
    """What projecting needs to remember between runs (rebuildable from the log)."""

    log_public_key: bytes
    reporters: ReporterWeights = field(default_factory=ReporterWeights)
    standing: Standing = field(default_factory=Standing)
    registry: dict[str, Registration] = field(default_factory=dict)
    next_index: int = 0
    ladder_rule: str = CURRENT_RULE  # the rung rule new ladder rows are written under

    @property
    def log_key_id(self) -> str:
        return keys.key_id(self.log_public_key)

    def resolve(self, kid: str) -> bytes | None:
        if kid == self.log_key_id:
            return self.log_public_key
        reg = self.registry.get(kid)
        return None if reg is None else reg.public_key

    def feed_snapshot(self, index: int, snapshot: RatingSnapshot) -> None:
        self.reporters.add(index, snapshot)
        self.standing.add_snapshot(index, snapshot)

    def feed_approval(self, index: int, approval: MarketplaceApproval) -> None:
        self.standing.add_approval(index, approval)

    def feed_evidence(self, item: EvidenceItem, index: int) -> None:
        """Replay evidence derived before, logged at ``index`` (in log order), into the standing
        policy's state, as derivation does: an approved marketplace's report vouches, a sitting's item
        spaces the agent's later sittings, a run's asked item (fresh or private) its later runs, a
        private answer and a gap failure are remembered. The evidence is the current derivation's (an
        earlier release's is derived again at start-up:
        :func:`~trustscore.services.projector.rederive`)."""
        if item.issuer is None and item.key is not None and item.key.startswith(SITTING_KEY):
            opened = int(item.key[len(SITTING_KEY) :].split(":", 1)[0])  # sitting:<open index>:<item>
            self.standing.sitting_weight(item.agent, item.dimension, index, opened, item.at)
        elif is_gap(item.issuer, item.key):
            assert item.key is not None
            self.standing.gap(item.agent, item.key, item.result == "failure")
        elif is_asked(item.issuer, item.key):  # a run's asked item spaces the agent's later runs
            self.standing.fresh_weight(item.agent, item.dimension, index, item.at)
            assert item.key is not None
            if item.key.startswith(PRIVATE_KEY):  # and a private answer is the first or a lower one
                self.standing.answered(item.agent, item.key, item.value, "first")
            elif item.key.startswith(LOWER_KEY):
                self.standing.answered(item.agent, first_key(item.key), item.value, "lower")
        elif item.issuer == POOL_ISSUER:
            self.standing.count_pooled(item.agent, item.dimension, item.source, item.extra_weight, item.at)
            return
        reporter = item.issuer
        if (
            reporter is not None
            and reporter != REVERIFY_ISSUER
            and item.source != work.SELF_REPORTED
            and self.standing.approved(reporter, index)
            and vouches(item)
        ):
            self.standing.vouch(item.agent, index, reporter)
        self.standing.observe(item.agent, item.dimension, item.key, item.source, item.extra_weight, item.at)

    def replay(
        self,
        snapshots: Iterable[tuple[int, bytes]],
        approvals: Iterable[tuple[int, bytes]],
        evidence: Iterable[tuple[int, EvidenceItem]],
    ) -> None:
        """Rebuild the state from what a projection stored (the server's projector after a restart): the
        leaves of every rating snapshot and approval, then the evidence items with their log indexes, in
        log order."""
        for index, leaf in snapshots:
            snapshot = audit.parse_leaf(leaf).statement.predicate
            assert isinstance(snapshot, RatingSnapshot)
            self.feed_snapshot(index, snapshot)
        for index, leaf in approvals:
            approval = audit.parse_leaf(leaf).statement.predicate
            assert isinstance(approval, MarketplaceApproval)
            self.feed_approval(index, approval)
        for index, item in evidence:
            self.feed_evidence(item, index)


def project(
    entries: Iterable[tuple[int, bytes | None]],
    state: ProjectionState,
    *,
    verify: bool,
    ladder_rules: Mapping[int, str] | None = None,
) -> Projected:
    """Project ``entries`` (index, leaf bytes), which must continue ``state`` in index order.

    A leaf may be None where the caller knows the entry is a card (the server, which admitted it): cards
    yield no evidence, and only an offline replay (``verify``) needs their keys. ``ladder_rules``: the rung
    rule of each entry whose ladder rows were written under another rule than ``state``'s (a
    re-derivation keeps each row's rule).
    """
    out = Projected()
    context = Context(reporter_weight=state.reporters.weight, standing=state.standing)
    for index, leaf in entries:
        if index != state.next_index:
            raise ValueError(f"projection expected entry {state.next_index}, got {index}")
        state.next_index = index + 1
        if leaf is None:
            if verify:
                raise ValueError(f"entry {index}: a verifying projection needs every leaf")
            continue
        prepared = audit.parse_leaf(leaf)
        stmt = prepared.statement
        if verify:
            try:
                checked = check(prepared, state.resolve)
                signers = [s.keyid for s in prepared.envelope.signatures]
                admit(checked.statement, signers, state.registry.get, state.log_key_id)
            except TrustscoreError as exc:
                out.rejected.append((index, exc.message))
                continue
        reg = registration_of(stmt)
        if reg is not None:
            if verify:
                state.registry.setdefault(reg.id, reg)
            continue
        items = derive(index, stmt, context)
        out.evidence.extend(items)
        rule = state.ladder_rule if ladder_rules is None else ladder_rules.get(index, state.ladder_rule)
        standing = functools.partial(_has_standing, state.standing, index)
        out.ladder.extend(ladder_rows(index, stmt, items, rule, standing))
        if isinstance(stmt.predicate, RatingSnapshot):
            adjusted = {r.agent: r.adjusted for r in stmt.predicate.ratings}
            out.snapshots.extend(SnapshotRow(index, s, adjusted[s.agent]) for s in derive_snapshots(stmt))
            state.feed_snapshot(index, stmt.predicate)
        elif isinstance(stmt.predicate, MarketplaceApproval):
            state.feed_approval(index, stmt.predicate)
    return out


def _has_standing(standing: Standing, index: int, reporter: str) -> bool:
    return standing.has_standing(reporter, index)
