"""Name look-alikes (issue #10): confusable display names share a skeleton; distinct names do not."""

from __future__ import annotations

import pytest

from trustscore.names import NameIndex, skeleton


@pytest.mark.parametrize(
    "lookalike",
    [
        "PayPal Agent",
        "paypal agent",
        "PAYPAL-AGENT",
        "Pаypal Agent",  # Cyrillic а
        "Payp\u200bal Agent",  # zero-width space
        "ＰａｙＰａｌ Ａｇｅｎｔ",  # fullwidth (NFKC)
        "PayPa1 Agent",  # digit one
        "Páypal Agent",  # accent
    ],
)
def test_confusable_names_share_a_skeleton(lookalike: str) -> None:
    assert skeleton(lookalike) == skeleton("PayPal Agent")


@pytest.mark.parametrize("other", ["PayPal Agents", "PayPol Agent", "Stripe Agent", ""])
def test_distinct_names_do_not(other: str) -> None:
    assert skeleton(other) != skeleton("PayPal Agent")


def test_only_earlier_agents_are_named_and_renames_move() -> None:
    index = NameIndex()
    index.add(1, "ts1_original", "Acme Bot")
    index.add(5, "ts1_copy", "Acmе Bot")  # Cyrillic е
    assert index.confusable_with("ts1_copy", "Acmе Bot") == ["ts1_original"]
    assert index.confusable_with("ts1_original", "Acme Bot") == []  # the first holder is not the look-alike
    index.add(9, "ts1_copy", "Something Else")
    assert index.confusable_with("ts1_copy", "Something Else") == []


@pytest.mark.parametrize("lookalike", ["PayPaI Agent", "PAYPAI AGENT", "PayPa| Agent", "PayPaℓ Agent"])
def test_capital_i_for_small_l_is_confusable(lookalike: str) -> None:
    """review-integrity: capital I (U+0049) is drawn like small l in most sans-serif fonts (TR39 maps it
    to l), but case folding made it i first, so "PayPaI" passed as a distinct name."""
    assert skeleton(lookalike) == skeleton("PayPal Agent")
    index = NameIndex()
    index.add(1, "ts1_original", "PayPal Agent")
    index.add(2, "ts1_copy", lookalike)
    assert index.confusable_with("ts1_copy", lookalike) == ["ts1_original"]
