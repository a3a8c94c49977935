"""A rating in plain sentences, for a model deciding whether to trust a counterparty.

Pure: reads the published rating JSON (``GET /v1/agents/{id}/rating``) and says what it shows and, as
much, what it does not: an unknown stays unknown with its reason (null is not zero), every score comes
with its interval and its n, and verification is reported as the bureau found it.
"""

from __future__ import annotations

from typing import Any


def _interval(value: Any) -> str:
    if isinstance(value, list | tuple) and len(value) == 2:
        return f" (interval {value[0]}–{value[1]})"
    return ""


def explain(rating: dict[str, Any]) -> str:
    """Sentences describing ``rating``: total and grade, coverage and n, each dimension, verification."""
    lines = []
    total, grade = rating.get("total"), rating.get("grade")
    reasons: dict[str, str] = rating.get("null_reasons") or {}
    if total is None:
        lines.append(
            f"No total score: unknown ({reasons.get('total', 'no scored dimensions')}), which is not a low score."
        )
    else:
        lines.append(f"Total {total}/1000, grade {grade}{_interval(rating.get('total_interval'))}.")
    coverage = rating.get("coverage")
    lines.append(
        f"Based on {rating.get('n', 0)} evidence item(s); coverage {coverage} of the weighted dimensions"
        f" under model {rating.get('model_version')}."
    )
    for name, dim in sorted((rating.get("dimensions") or {}).items()):
        if not isinstance(dim, dict):
            continue
        if dim.get("score") is None:
            lines.append(f"- {name}: unknown ({dim.get('null_reason') or 'no evidence'}).")
        else:
            lines.append(f"- {name}: {dim['score']}{_interval(dim.get('interval'))}, n={dim.get('n')}.")
    verification = rating.get("verification") or {}
    if verification.get("verified"):
        lines.append("Verified: the bureau re-asked its declared endpoint recently and the answers matched.")
    else:
        why = verification.get("lapsed")
        lines.append("Not verified" + (f" ({why})." if why else ": no re-verification has matched yet."))
    return "\n".join(lines)
