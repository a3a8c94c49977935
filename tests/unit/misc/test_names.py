"""Name look-alikes (issue #10): confusable display names share a skeleton; distinct names do not."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trustscore.names import DisplayNames, NameIndex, _mapped, skeleton


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


@pytest.mark.parametrize(
    "lookalike",
    [
        "PayBot\u3164",
        "Pay\u2800Bot",
        "Pay\u115fBot",
        "PayB\u1d0ft",
        "PayBot\uffa0",
        "ᴘᴀʏʙᴏᴛ",
        "ᴩayBot",
        "Pay\U0001d159Bot",
    ],
)
def test_blank_letters_and_small_capitals_do_not_hide_a_lookalike(lookalike: str) -> None:
    """Hangul fillers and the blank Braille pattern are letters or symbols drawn as nothing, and NFKD
    keeps Latin small capitals: each of these showed as "PayBot" on a page and was not flagged (found by
    a review, 2026-12-07)."""
    assert skeleton(lookalike) == skeleton("PayBot")


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


def test_a_card_fed_late_never_brings_an_old_name_back() -> None:
    """Two reads of the cards racing each other could feed an agent's older card after its newer one, and
    gave a renamed agent its old name back (every reader kept a dict of its own, last write wins)."""
    index = NameIndex()
    index.add(3, "ts1_a", "Old Name")
    index.add(8, "ts1_a", "New Name")
    index.add(3, "ts1_a", "Old Name")  # the racing read's feed, older
    index.add(8, "ts1_a", "New Name")  # and fed twice
    named = index.agents["ts1_a"]
    assert (named.name, named.first, named.last) == ("New Name", 3, 8)
    assert index.by_skeleton == {skeleton("New Name"): {"ts1_a"}}
    index.add(1, "ts1_a", "Older Still")  # an earlier registration read last: only its index counts
    assert (index.agents["ts1_a"].name, index.agents["ts1_a"].first) == ("New Name", 1)
    assert index.next_index == 9


def test_ids_are_sorted_and_a_list_once_returned_never_changes() -> None:
    index = NameIndex()
    for i, agent in enumerate(["ts1_c", "ts1_a", "ts1_b"]):
        index.add(i, agent, agent)
    first = index.ids()
    assert first == ["ts1_a", "ts1_b", "ts1_c"]
    assert index.ids() is first  # nothing new: the same list
    index.add(5, "ts1_0", "zero")
    index.add(6, "ts1_b", "renamed")  # a known agent's new card adds no id
    second = index.ids()
    assert first == ["ts1_a", "ts1_b", "ts1_c"]  # held by a caller across awaits: untouched
    assert second == ["ts1_0", "ts1_a", "ts1_b", "ts1_c"]


def test_display_names_read_the_index() -> None:
    index = NameIndex()
    names = DisplayNames(index)
    index.add(1, "ts1_a", "Alpha")
    assert dict(names) == {"ts1_a": "Alpha"} and "ts1_a" in names and names.get("ts1_b", "?") == "?"
    index.add(2, "ts1_a", "Beta")
    assert names["ts1_a"] == "Beta" and len(names) == 1


def _general(name: str) -> str:
    """skeleton() by its general path, for any string (ASCII included)."""
    return _mapped(name).replace("rn", "m").replace("vv", "w").replace("l", "i")


def test_the_ascii_path_agrees_with_the_general_one_on_every_character_and_pair() -> None:
    for a in range(128):
        assert skeleton(chr(a)) == _general(chr(a)), a
        for b in range(128):
            pair = chr(a) + chr(b)
            assert skeleton(pair) == _general(pair), pair


@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=40))
def test_the_ascii_path_agrees_with_the_general_one_on_names(name: str) -> None:
    assert skeleton(name) == _general(name)
