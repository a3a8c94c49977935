"""The rung rules: how strong the evidence a work record left is, by a named, versioned, pure rule.

Rungs (docs/evidence-ladder.md): 0 ``unflown`` (inferred, uncorroborated, no execution evidence) <
1 ``done_claimed`` < 2 ``artifact_changed`` < 3 ``test_or_build_passed`` < 4 ``commit_observed`` <
5 ``ci_or_deployment_verified``. None of them means the work went wrong; they are degrees of evidence.

A released rule never changes: a fix is a new version. ``ladder-rule@0`` is the withdrawn rule that
granted rung 3 from a test command alone (kept so that a rescan can show what the fix moved);
``ladder-rule@1`` needs a captured exit code of 0; ``ladder-rule@2`` (2026-12-07) also needs every kind
of confirmation (CI, PR, deployment) whose status was decided to be green at its newest: under ``@1`` any
green confirmation gave rung 5, so a deployment that failed after green CI, or CI gone red, counted as
verified work in the outcome stats (as a red test run had counted before ``@1``). Scoring weights
(:func:`weight`) are pinned to :data:`SCORING_RULE` for ``work-record/v1`` whatever rule the ladder index
is on, so a rule change never moves a released model's rating.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, Literal

import msgspec

from trustscore.errors import InvalidInput
from trustscore.kinds.work_records import WorkRecord

RUNG_NAMES: Final = (
    "unflown",
    "done_claimed",
    "artifact_changed",
    "test_or_build_passed",
    "commit_observed",
    "ci_or_deployment_verified",
)
UNFLOWN, DONE_CLAIMED, ARTIFACT_CHANGED, TEST_OR_BUILD_PASSED, COMMIT_OBSERVED, CI_VERIFIED = range(6)
#: "Verified" in the ladder's sense.
VERIFIED_RUNG: Final = TEST_OR_BUILD_PASSED

RULE_0: Final = "ladder-rule@0"
RULE_1: Final = "ladder-rule@1"
RULE_2: Final = "ladder-rule@2"
CURRENT_RULE: Final = RULE_2
#: The rule whose rung weighs a work-record/v1 item in scoring (never changes for this kind version).
SCORING_RULE: Final = RULE_1

#: Scoring weight of a rung (multiplies ``extra_weight``); rung 0 carries no scoring evidence.
RUNG_WEIGHT: Final = {1: 0.2, 2: 0.4, 3: 0.6, 4: 0.8, 5: 1.0}
#: A self-attested record weighs this (times the rung's weight); a confirmed one weighs its reporter's
#: counterparty weight (0.5..1, docs/evidence-mapping.md) times the rung's weight. 0.4 < 0.5, so a
#: self-attested rung always weighs less than the same rung confirmed by anyone.
SELF_ATTESTED_WEIGHT: Final = 0.4

#: Who vouches for a ladder row: the agent itself (``self``), a reporter with standing (``confirmed``), the
#: server's own grader (``server``), or a confirming reporter without standing (``unvouched``: its items go to
#: the subject's pool, and the outcome stats rank its rows as the agent's own; since 2026-12-07).
Attested = Literal["self", "confirmed", "server", "unvouched"]


class Rung(msgspec.Struct, frozen=True, kw_only=True):
    """A record's rung under ``rule``, one line saying why, and whether anything could detect the outcome
    (a captured exit code, a commit, a confirmation, a changed artifact, or a claimed failure)."""

    rung: int
    rule: str
    summary: str
    outcome_detected: bool

    @property
    def name(self) -> str:
        return RUNG_NAMES[self.rung]


def _rule(w: WorkRecord, rule: str, *, exit_needed: bool, newest_decides: bool = False) -> Rung:
    def at(rung: int, summary: str, detected: bool = True) -> Rung:
        return Rung(rung=rung, rule=rule, summary=summary, outcome_detected=detected)

    changed = any(a.changed for a in w.artifacts)
    captured = [r for r in w.runs if r.exit_code is not None]
    detected = bool(captured or w.commits or w.confirmations or changed)
    if w.claimed_outcome == "failed":
        return at(UNFLOWN, "the work is reported as not finished")
    if newest_decides:  # rule 2: each kind's newest decided status counts, and a red one stands
        newest: dict[str, str] = {}
        for c in w.confirmations:
            if c.status != "pending":
                newest[c.kind] = c.status
        red = [kind for kind, status in newest.items() if status == "failure"]
        if red:  # no higher than a failed run, a commit on top of it neither
            return at(
                ARTIFACT_CHANGED if changed or w.commits else DONE_CLAIMED,
                f"the newest {red[0]} status is failure",
            )
        confirmed = [kind for kind, status in newest.items() if status == "success"]
    else:
        confirmed = [c.kind for c in w.confirmations if c.status == "success"]
    if confirmed:
        return at(CI_VERIFIED, f"{confirmed[0]} confirmed it")
    last_failed = exit_needed and bool(captured) and captured[-1].exit_code != 0
    if last_failed:  # a failed run never reaches rung 3, nor does a commit on top of it
        code = captured[-1].exit_code
        all_failed = all(r.exit_code != 0 for r in captured)
        why = "every test or build run failed" if all_failed else f"the last test or build run exited {code}"
        return at(ARTIFACT_CHANGED if changed or w.commits else DONE_CLAIMED, why)
    if w.commits:
        return at(COMMIT_OBSERVED, f"commit {w.commits[-1].commit[:12]} observed")
    if exit_needed and captured:
        return at(TEST_OR_BUILD_PASSED, "a test or build run exited 0")
    if not exit_needed and w.runs:
        return at(TEST_OR_BUILD_PASSED, "a test or build command ran")
    if changed:
        return at(ARTIFACT_CHANGED, "an artifact changed" + ("; result unknown" if w.runs else ""))
    if w.runs:  # rule 1: commands ran, but no result was ever captured
        return at(DONE_CLAIMED, "result unknown", detected)
    if w.claimed_outcome in ("done", "partial"):
        return at(DONE_CLAIMED, "the work is claimed finished", detected)
    return at(UNFLOWN, "no claim and no execution evidence", detected)


def _rule_0(w: WorkRecord) -> Rung:
    return _rule(w, RULE_0, exit_needed=False)


def _rule_1(w: WorkRecord) -> Rung:
    return _rule(w, RULE_1, exit_needed=True)


def _rule_2(w: WorkRecord) -> Rung:
    return _rule(w, RULE_2, exit_needed=True, newest_decides=True)


RULES: Final[dict[str, Callable[[WorkRecord], Rung]]] = {RULE_0: _rule_0, RULE_1: _rule_1, RULE_2: _rule_2}


def check_rule(rule: str) -> str:
    """``rule`` if it is a known rule version; raise naming the known ones otherwise."""
    if rule not in RULES:
        raise InvalidInput(f"unknown ladder rule {rule!r}; known: {', '.join(sorted(RULES))}")
    return rule


def previous_rule(rule: str) -> str | None:
    """The rule released before ``rule`` (None for the first): what a rescan compares with by default."""
    names = list(RULES)
    at = names.index(check_rule(rule))
    return names[at - 1] if at else None


def rung_of(w: WorkRecord, rule: str = CURRENT_RULE) -> Rung:
    """The rung of work record ``w`` under ``rule``."""
    return RULES[check_rule(rule)](w)


def weight(rung: int, attestation: Attested, reporter_weight: float) -> float:
    """The scoring weight of a rung-``rung`` work-record item (0 for unflown)."""
    base = RUNG_WEIGHT.get(rung, 0.0)
    return base * (SELF_ATTESTED_WEIGHT if attestation == "self" else reporter_weight)
