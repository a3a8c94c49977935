"""The rating explanation says unknown for null (never a low score) and gives every interval and n."""

from __future__ import annotations

from trustscore.services.rating_explain import explain


def test_null_is_unknown_not_zero() -> None:
    text = explain(
        {
            "total": None,
            "grade": None,
            "null_reasons": {"total": "insufficient_coverage"},
            "n": 0,
            "coverage": 0.0,
            "model_version": "trustscore-v2",
            "dimensions": {"integrity": {"score": None, "null_reason": "no_evidence"}},
            "verification": {"verified": False, "lapsed": None},
        }
    )
    assert "No total score: unknown (insufficient_coverage)" in text
    assert "integrity: unknown (no_evidence)" in text
    assert "0/1000" not in text and "integrity: 0" not in text


def test_scores_come_with_intervals_n_and_verification() -> None:
    text = explain(
        {
            "total": 812,
            "grade": "A",
            "total_interval": [760, 850],
            "n": 40,
            "coverage": 0.6,
            "model_version": "trustscore-v2",
            "dimensions": {"integrity": {"score": 0.91, "interval": [0.85, 0.95], "n": 24}},
            "verification": {"verified": True},
        }
    )
    assert "Total 812/1000, grade A (interval 760–850)" in text
    assert "integrity: 0.91 (interval 0.85–0.95), n=24" in text
    assert "Based on 40 evidence item(s)" in text and text.rstrip().endswith("matched.")
