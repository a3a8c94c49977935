"""The evidence of ``reverification/v1``, for ``evidence/derive.py`` to call (docs/reverification.md,
"Evidence"). Who may sign one is an admission rule in ``kinds/admission.py``.

Evidence (source ``verified``, issuer ``server-reverify``, at ``ran_at``):

- integrity, key ``reverify:standing:{exam}@{exam_version}``: the agent's standing on that exam version,
  replaced by each later run of any report of it (one standing item per agent and exam version, so
  re-submitting a report cannot multiply it; issue #10). match: value = share, success; mismatch: value = share, partial (share >= 500) or
  failure; unreachable: value 0, failure (a down endpoint is never a silent pass; a later match heals it).
- integrity, key ``reverify:mismatch:{report_index}:{seed}``, mismatch only: value 0, failure. It is never
  replaced, so a mismatch keeps counting against integrity after the endpoint matches again.
- integrity, key ``reverify:private-gap:{exam}@{exam_version}``, when the run asked public and private
  items: 0 / failure when the mean public grade exceeds the mean private grade by more than
  ``status.PRIVATE_GAP_MILLIS`` (public answers memorised), else 1 / success; replaced by later runs,
  except that since standing-v5 a success no longer replaces a failure (``evidence/derive.py``: the log
  publishes each private item's grade, so a gap could be closed by answers learnt from it).
- each answered item of a private set: its dimension, value and result, key
  ``reverify:private:{name@version}:{item_id}``. Which answers count is the standing policy's
  (``evidence/derive.py``, standing-v5): the agent's first answer to the item, and at most one later
  answer below it (key ``reverify:private-lower:…``); never a later better one, since an endpoint asked
  the same fixed item again may answer it from memory (under standing-v4 a newer answer replaced the
  older at full weight: capability 0 -> 100). A run's fresh instances (item ids ``fresh-…``: new items each
  run) keep key ``exam:{generator}:{item_id}``. Both are weighed by the time since the agent's previous run
  with such items in the dimension (fresh ones since standing-v4, private ones since standing-v5), and a
  failed security probe counts in every run (under standing-v4 it was held back while it only started a
  downgrade streak, and a passing run reset the streak, so two failures in three runs never counted).
"""

from __future__ import annotations

from trustscore.errors import InvalidInput
from trustscore.kinds.reverification import Reverification
from trustscore.kinds.reverification.sampling import FRESH_ITEM_PREFIX
from trustscore.ledger.statements import ParsedStatement, parse_time
from trustscore.reverify.status import gap_exceeded, private_gap
from trustscore.scoring.inputs import DerivedEvidence, Result

#: The issuer of re-verification evidence: the literal the released trustscore-v1 weights file exempts
#: from the issuer cap. The key that signed is in the statement's ``verifier``.
ISSUER = "server-reverify"
SOURCE = "verified"
PARTIAL_FROM_MILLIS = 500
#: The longest item id an exam file may have (exams/loader.py), which a fresh instance's id exceeds.
MAX_EXAM_ITEM_ID = 64


def standing(r: Reverification) -> tuple[float, Result]:
    """The value and result of the report's integrity standing after run ``r``."""
    if r.outcome == "match":
        return r.matched_millis / 1000, "success"
    if r.outcome == "mismatch":
        return r.matched_millis / 1000, "partial" if r.matched_millis >= PARTIAL_FROM_MILLIS else "failure"
    return 0.0, "failure"


def standing_key(r: Reverification) -> str:
    """The key of the standing item: one per agent (keys are per agent) and exam version."""
    return f"reverify:standing:{r.exam}@{r.exam_version}"


#: The key prefixes of an answer to an item of a private set: the agent's first, and a later one below it
#: (standing-v5).
PRIVATE_KEY = "reverify:private:"
LOWER_KEY = "reverify:private-lower:"
#: The key prefix of a run's private-gap judgement (one item per agent and exam version).
GAP_KEY = "reverify:private-gap:"


def is_asked(issuer: str | None, key: str | None) -> bool:
    """Whether an evidence item is a run's answer to an item it asked, fresh or of a private set: spaced
    in time by the standing policy (standing-v5)."""
    if issuer != ISSUER or key is None:
        return False
    return key.startswith((PRIVATE_KEY, LOWER_KEY)) or is_fresh(issuer, key)


def is_gap(issuer: str | None, key: str | None) -> bool:
    """Whether an evidence item is a run's private-gap judgement."""
    return issuer == ISSUER and key is not None and key.startswith(GAP_KEY)


def lower_key(key: str) -> str:
    """The key of a later, lower answer to the private item keyed ``key`` (a :data:`PRIVATE_KEY` key)."""
    return LOWER_KEY + key[len(PRIVATE_KEY) :]


def first_key(key: str) -> str:
    """The key of the first answer to the private item whose lower answer is keyed ``key``."""
    return PRIVATE_KEY + key[len(LOWER_KEY) :]


def is_fresh(issuer: str | None, key: str | None) -> bool:
    """Whether an evidence item (by its issuer and key) is a run's fresh instance (docs/reverification.md,
    "Fresh instances"): each run's are new items, spaced in time by the standing policy (standing-v4)."""
    if issuer != ISSUER or key is None or not key.startswith("exam:"):
        return False
    item_id = key.rsplit(":", 1)[-1]  # fresh-<base64url signature>: longer than any exam file's id (64)
    return item_id.startswith(FRESH_ITEM_PREFIX) and len(item_id) > MAX_EXAM_ITEM_ID


def derive_reverification(index: int, stmt: ParsedStatement) -> list[DerivedEvidence]:
    """The evidence items of the admitted re-verification logged at ``index``, in a fixed order."""

    r = stmt.predicate
    if not isinstance(r, Reverification):
        raise InvalidInput(f"not a re-verification but a {stmt.kind.predicate_type} statement")
    at = parse_time(r.ran_at, what="ran_at")

    def item(dimension: str, value: float, result: Result, key: str) -> DerivedEvidence:
        return DerivedEvidence(
            index=index,
            agent=r.agent,
            dimension=dimension,
            source=SOURCE,
            at=at,
            value=value,
            result=result,
            key=key,
            issuer=ISSUER,
        )

    value, result = standing(r)
    out = [item("integrity", value, result, standing_key(r))]
    if r.outcome == "mismatch":
        out.append(item("integrity", 0.0, "failure", f"reverify:mismatch:{r.report_index}:{r.seed}"))
    if private_gap(r) is not None:  # public answers far above private ones: memorised, not able
        exceeded = gap_exceeded(r)
        out.append(
            item(
                "integrity",
                0.0 if exceeded else 1.0,
                "failure" if exceeded else "success",
                f"{GAP_KEY}{r.exam}@{r.exam_version}",
            )
        )
    for p in r.private_items:
        if p.value_millis is None:  # asked and not answered: no evidence (the private gap counts it 0)
            continue
        fresh = p.item_id.startswith(FRESH_ITEM_PREFIX) and len(p.item_id) > MAX_EXAM_ITEM_ID
        key = f"exam:{p.exam}:{p.item_id}" if fresh else f"{PRIVATE_KEY}{p.exam}:{p.item_id}"
        out.append(item(p.dimension, p.value_millis / 1000, p.result, key))
    return out


__all__ = [
    "GAP_KEY",
    "ISSUER",
    "LOWER_KEY",
    "PRIVATE_KEY",
    "SOURCE",
    "derive_reverification",
    "first_key",
    "is_asked",
    "is_fresh",
    "is_gap",
    "lower_key",
    "standing",
    "standing_key",
]
