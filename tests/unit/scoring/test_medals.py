"""Medals (issue #14): the released rules file, each eligibility rule pinned by the attack it stops, the
freshness factor's definition, and properties (monotone in the score; unreal sources and re-verification
failures never count towards eligibility)."""

from __future__ import annotations

import datetime as dt
import hashlib
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trustscore.errors import ConfigError, UnsupportedKind
from trustscore.evidence.standing import POOL_ISSUER
from trustscore.scoring import EvidenceBatch, EvidenceItem, load_weights, score_agents
from trustscore.scoring.medals import (
    BELOW,
    MEDALS,
    NO_SCORE,
    RELEASED_DIGESTS,
    STALE,
    TOO_FEW,
    DimensionMedal,
    MedalRules,
    award,
    find_medal_rules,
    load_medal_rules,
    medals_of,
    medals_path,
    parse_medal_rules,
)
from trustscore.scoring.times import to_micros

from .conftest import AT, WEIGHTS, days_ago, item

V2 = load_weights(WEIGHTS / "trustscore-v2.toml")
RULES = load_medal_rules(medals_path(WEIGHTS, "trustscore-v2"), V2)  # release 1
SERVED = load_medal_rules(medals_path(WEIGHTS, "trustscore-v2", release=2), V2)
#: Pinned here independently of the code: a released medals file never changes.
RELEASED = {
    ("trustscore-v2", 1): "4d4fea069601f3e40448653cb0aa61c17148c53b23df71a38fd3c475893b7500",
    ("trustscore-v2", 2): "76e94101138f61f33c79f633ccac46abf331b2a3d20cc0a8a498ebb2f5f7058c",
    ("trustscore-v3", 1): "677c487dec5cbdba3719e264a1ee2ffc3a8ce8ab729c746440ff5bd0a4a583ce",
    ("trustscore-v3", 2): "b69cf05cd4615431694f3e244ec020ac789c4ca8d29c367a4a449bb394358199",
}
RANK = {None: 0, "bronze": 1, "silver": 2, "gold": 3}


def medals(
    items: list[EvidenceItem], rules: MedalRules = RULES, at: dt.datetime = AT
) -> dict[str, DimensionMedal]:
    [rating] = score_agents(items, None, V2, at, agents=["a"])
    [m] = medals_of(EvidenceBatch.from_items(items), [rating], rules, to_micros(at))
    assert m.rules_digest == rules.digest
    return m.dimensions


def perfect(
    n: int, dimension: str = "capability", source: str = "real", days: float = 1, **kw: Any
) -> list[EvidenceItem]:
    return [
        item(dimension=dimension, source=source, key=f"{source}-{dimension}-{i}", at=days_ago(days), **kw)
        for i in range(n)
    ]


@pytest.mark.parametrize(("model", "release"), sorted(RELEASED))
def test_released_files_are_immutable(model: str, release: int) -> None:
    data = medals_path(WEIGHTS, model, release=release).read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    assert digest == RELEASED[model, release] == RELEASED_DIGESTS[model, release]
    weights = load_weights(WEIGHTS / f"{model}.toml")
    rules = load_medal_rules(medals_path(WEIGHTS, model, release=release), weights)
    assert (rules.digest, rules.spec.release, rules.spec.weights_digest) == (digest, release, weights.digest)


def test_the_newest_release_is_served() -> None:
    rules = find_medal_rules(WEIGHTS, V2)
    assert rules is not None and rules.digest == SERVED.digest == RELEASED["trustscore-v2", 2]


def test_release_2_is_release_1_with_public_items_and_the_pool_unreal() -> None:
    assert (
        msgspec.structs.replace(
            SERVED.spec,
            schema_version=1,
            release=1,
            description=RULES.spec.description,
            unreal_sources=RULES.spec.unreal_sources,
            unreal_issuers=[],
        )
        == RULES.spec
    )
    assert SERVED.spec.unreal_sources == [*RULES.spec.unreal_sources, "real-benchmark"]
    assert SERVED.spec.unreal_issuers == [POOL_ISSUER]


def test_v3_medals_are_v2s_rules_for_the_v3_weights() -> None:
    v3 = load_weights(WEIGHTS / "trustscore-v3.toml")
    for release, v2_rules in ((1, RULES), (2, SERVED)):
        rules = load_medal_rules(medals_path(WEIGHTS, "trustscore-v3", release=release), v3)
        assert (rules.spec.weights_model, rules.spec.weights_digest) == ("trustscore-v3", v3.digest)
        renamed = msgspec.structs.replace(rules.spec, weights_model="trustscore-v2", weights_digest=V2.digest)
        assert renamed == v2_rules.spec  # the same rules, only the weights file they belong to differs
        with pytest.raises(ConfigError):  # and refused with any other weights file
            load_medal_rules(medals_path(WEIGHTS, "trustscore-v3", release=release), V2)
    served = find_medal_rules(WEIGHTS, v3)
    assert served is not None and served.spec.release == 2


def test_a_release_under_another_name_is_refused(tmp_path: Path) -> None:
    """A release-2 file named as release 3 (or 1) is refused, not served as the newest."""
    (tmp_path / "trustscore-v2.medals-3.toml").write_bytes(
        medals_path(WEIGHTS, "trustscore-v2", release=2).read_bytes()
    )
    with pytest.raises(ConfigError, match="says release 2, its name release 3"):
        find_medal_rules(tmp_path, V2)


def test_an_unpinned_release_of_a_released_models_medals_is_refused(tmp_path: Path) -> None:
    """Review (2026-12-08): a stray medals-3 file beside the released ones was served as the newest."""
    data = medals_path(WEIGHTS, "trustscore-v2", release=2).read_bytes()
    stray = data.replace(b"release = 2", b"release = 3").replace(b"min_real_items = 3", b"min_real_items = 1")
    (tmp_path / "trustscore-v2.medals-3.toml").write_bytes(stray)
    with pytest.raises(ConfigError, match="release 3 of trustscore-v2's medals is not pinned"):
        find_medal_rules(tmp_path, V2)


def test_thresholds_are_the_reference_bureaus() -> None:
    t = {name: (x.bronze, x.silver, x.gold) for name, x in RULES.spec.thresholds.items()}
    for name in ("capability", "delivery", "collaboration", "security", "negotiation"):
        assert t[name] == (60, 75, 88)
    assert t["reliability"] == (50, 65, 80)
    assert t["economic"] == (70, 85, 93)
    assert t["integrity"] == (65, 80, 90)
    assert (RULES.spec.min_real_items, RULES.spec.min_freshness, RULES.spec.half_life_days) == (3, 0.5, 30.0)


def test_a_changed_released_file_is_refused() -> None:
    data = medals_path(WEIGHTS, "trustscore-v2").read_bytes().replace(b"gold = 88", b"gold = 87", 1)
    with pytest.raises(ConfigError, match="released medals"):
        parse_medal_rules(data, V2)


def test_rules_for_another_weights_file_are_refused() -> None:
    v1 = load_weights(WEIGHTS / "trustscore-v1.toml")
    with pytest.raises(ConfigError, match="names weights trustscore-v2"):
        load_medal_rules(medals_path(WEIGHTS, "trustscore-v2"), v1)
    assert find_medal_rules(WEIGHTS, v1) is None  # no medals file: no medals (null), not "no medal"


@pytest.mark.parametrize(
    ("edit", "replacement", "message"),
    [
        (b"schema_version = 1", b"schema_version = 3", "schema_version 3"),
        (b"schema_version = 1", b"schema_version = 2", "schema_version 2 needs a release"),
        (b"schema_version = 1", b"schema_version = 1\nrelease = 2", "need schema_version 2"),
        (b"schema_version = 1", b'schema_version = 1\nunreal_issuers = ["x"]', "need schema_version 2"),
        (b"capability = { bronze = 60, silver = 75, gold = 88 }\n", b"", "exactly the dimensions"),
        (b"bronze = 60, silver = 75", b"bronze = 80, silver = 75", "bronze <= silver"),
        (b"min_real_items = 3", b"min_real_items = 0", "min_real_items"),
        (b"min_freshness = 0.5", b"min_freshness = 1.5", "min_freshness"),
        (b"unreal_sources", b"unknown_sources", "unknown_sources"),
    ],
)
def test_malformed_rules_are_refused(edit: bytes, replacement: bytes, message: str) -> None:
    data = medals_path(WEIGHTS, "trustscore-v2").read_bytes()
    assert edit in data
    with pytest.raises((ConfigError, UnsupportedKind), match=message):
        parse_medal_rules(data.replace(edit, replacement, 1), V2)


@pytest.mark.parametrize(
    ("edit", "replacement", "message"),
    [
        (b"release = 2", b"release = 1", "release must be"),
        (b"release = 2", b"release = 100", "release must be"),
        (b"gold = 88", b"gold = 87", "released medals of trustscore-v2 \\(release 2\\)"),
    ],
)
def test_malformed_release_2_rules_are_refused(edit: bytes, replacement: bytes, message: str) -> None:
    data = medals_path(WEIGHTS, "trustscore-v2", release=2).read_bytes()
    assert edit in data
    with pytest.raises(ConfigError, match=message):
        parse_medal_rules(data.replace(edit, replacement, 1), V2)


def test_public_exam_items_are_not_real_under_release_2() -> None:
    """Attack: perfect answers to the public exam files (their answers are public). Release 1 gave a medal;
    release 2 counts them for the score, never towards one."""
    public = perfect(40, source="real-benchmark")
    assert medals(public)["capability"].medal is not None
    m = medals(public, SERVED)["capability"]
    assert (m.medal, m.real_n, m.reason) == (None, 0, TOO_FEW)
    assert medals(perfect(3) + public, SERVED)["capability"].real_n == 3


def test_pool_items_are_not_real_under_release_2() -> None:
    """Attack: one real item from a reporter with standing, padded to three by two free keys whose reports
    go to the standing pool."""
    pool = [item(key=f"pool-{i}", issuer=POOL_ISSUER, extra_weight=0.01) for i in range(2)]
    assert medals(perfect(1) + pool)["capability"].real_n == 3
    m = medals(perfect(1) + pool, SERVED)["capability"]
    assert (m.medal, m.real_n, m.reason) == (None, 1, TOO_FEW)


def test_gold_on_three_fresh_real_items() -> None:
    m = medals(perfect(3))
    assert m["capability"] == DimensionMedal(
        medal="gold", real_n=3, freshness=round(0.5 ** (1 / 30), 6), reason=None
    )
    assert (
        m["delivery"].medal is None and m["delivery"].reason == NO_SCORE and m["delivery"].freshness is None
    )


def test_two_real_items_are_too_few() -> None:
    """Attack: a perfect score on two items. It is a score, never a medal."""
    m = medals(perfect(2))["capability"]
    assert (m.medal, m.real_n, m.reason) == (None, 2, TOO_FEW)


@pytest.mark.parametrize("source", ["self-reported", "simulation", "synthetic"])
def test_unreal_sources_never_count(source: str) -> None:
    """Attack: pad two real items with any number of self-reported or simulated ones."""
    m = medals(perfect(2) + perfect(50, source=source))["capability"]
    assert (m.medal, m.real_n, m.reason) == (None, 2, TOO_FEW)


def test_reverification_failures_count_for_the_score_never_for_medals() -> None:
    """Attack: an agent whose endpoint fails re-verification must not reach 3 items through the failures;
    the failures still lower the score (and so can cost a medal)."""
    reverify = [item(dimension="integrity", source="verified", issuer="server-reverify", key=f"reverify:mismatch:{i}",
                     value=0.0, result="failure") for i in range(5)]  # fmt: skip
    good = perfect(2, dimension="integrity", source="verified")
    m = medals(good + reverify)["integrity"]
    assert (m.medal, m.real_n, m.reason) == (None, 2, TOO_FEW)
    [with_failures] = score_agents(good + reverify, None, V2, AT)
    [without] = score_agents(good, None, V2, AT)
    assert with_failures.dimensions["integrity"] < without.dimensions["integrity"]  # type: ignore[operator]
    # A re-verification match counts like any real item.
    match = item(
        dimension="integrity",
        source="verified",
        issuer="server-reverify",
        key="reverify:standing:x",
        result="success",
    )
    assert medals([*good, match])["integrity"].real_n == 3


def test_a_superseded_item_is_counted_once() -> None:
    """Attack: resubmit one keyed item three times; the engine counts only the newest, and so do medals."""
    same = [item(key="one", at=days_ago(d)) for d in (1, 2, 3)]
    assert medals(same)["capability"].real_n == 1


def test_future_and_zero_weight_items_do_not_count() -> None:
    later = [item(key=f"f{i}", at=AT + dt.timedelta(days=1)) for i in range(3)]
    zero = [item(key=f"z{i}", extra_weight=0.0) for i in range(3)]
    assert medals(perfect(2) + later + zero)["capability"].real_n == 2


def test_freshness_is_the_decay_of_the_newest_real_item() -> None:
    """Freshness = 0.5 ** (age of the newest real item / 30 days): exactly 0.5 at 30 days (a medal), stale
    after; a newer self-reported item does not refresh it."""
    at_half_life = medals(perfect(12, days=30))["capability"]  # 12 items: the decayed score stays gold
    assert at_half_life.freshness == 0.5 and at_half_life.medal is not None
    stale = medals(perfect(3, days=31) + perfect(3, source="self-reported", days=0))["capability"]
    assert stale.reason == STALE and stale.freshness == pytest.approx(0.5 ** (31 / 30), abs=1e-6)
    # One fresh real item among old ones refreshes the dimension (the newest counts).
    mixed = medals([*perfect(2, days=90), item(key="new", at=days_ago(0))])["capability"]
    assert mixed.freshness == 1.0


def test_below_bronze() -> None:
    low = [item(key=f"l{i}", value=0.5) for i in range(6)]
    m = medals(low)["capability"]
    assert (m.medal, m.reason) == (None, BELOW)


@given(
    score=st.floats(0, 100, allow_nan=False),
    bump=st.floats(0, 100, allow_nan=False),
    real_n=st.integers(0, 10),
    freshness=st.one_of(st.none(), st.floats(0, 1)),
    dimension=st.sampled_from(sorted(RULES.spec.thresholds)),
)
def test_raising_a_score_never_loses_a_medal(
    score: float, bump: float, real_n: int, freshness: float | None, dimension: str
) -> None:
    t = RULES.spec.thresholds[dimension]
    low = award(score, real_n, freshness, t, RULES.spec)
    high = award(min(100.0, score + bump), real_n, freshness, t, RULES.spec)
    assert RANK[high.medal] >= RANK[low.medal]
    assert low.medal is None or low.medal in MEDALS


reals = st.builds(
    EvidenceItem,
    agent=st.just("a"),
    dimension=st.sampled_from(V2.dimension_names),
    source=st.sampled_from(["real", "verified", "real-benchmark", "real-confidential"]),
    at=st.integers(0, 90).map(days_ago),
    value=st.floats(0, 1),
    key=st.one_of(st.none(), st.sampled_from(["k1", "k2", "k3"])),
)


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(
    real=st.lists(reals, max_size=12),
    extra=st.lists(
        st.builds(
            EvidenceItem,
            agent=st.just("a"),
            dimension=st.sampled_from(V2.dimension_names),
            source=st.sampled_from(["self-reported", "simulation", "synthetic", "verified"]),
            at=st.integers(0, 90).map(days_ago),
            value=st.floats(0, 1),
            result=st.sampled_from(["failure", "partial", "success"]),
            issuer=st.just("server-reverify"),
        ).filter(lambda i: i.source != "verified" or i.result != "success"),
        max_size=12,
    ),
)
def test_unreal_and_failed_reverification_items_never_count(
    real: list[EvidenceItem], extra: list[EvidenceItem]
) -> None:
    """Adding self-reported, simulated or failed re-verification items never changes the real count or the
    freshness, and never earns a medal the real items alone did not."""
    alone, padded = medals(real), medals(real + extra)
    for name in V2.dimension_names:
        assert padded[name].real_n == alone[name].real_n
        assert padded[name].freshness == alone[name].freshness
        if alone[name].medal is None and alone[name].reason in (TOO_FEW, STALE):
            assert padded[name].medal is None


def test_order_of_the_evidence_does_not_matter() -> None:
    items = perfect(3) + perfect(4, dimension="delivery", days=10) + [item(key="x", value=0.0)]
    assert medals(items) == medals(list(reversed(items)))


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(real=st.lists(reals, max_size=20))
def test_the_column_function_agrees_with_award_cell_by_cell(real: list[EvidenceItem]) -> None:
    """medals_of works on columns; award is the rule for one cell. They must never disagree."""
    [rating] = score_agents(real, None, V2, AT, agents=["a"])
    for name, m in medals(real).items():
        expected = award(
            rating.dimensions[name], m.real_n, m.freshness, RULES.spec.thresholds[name], RULES.spec
        )
        assert m == expected, name


def test_a_threshold_is_read_against_the_published_score() -> None:
    """87.99999999999997 is published as 88.0: it earns gold, as a reader of the rating would expect."""
    t = RULES.spec.thresholds["capability"]
    assert award(87.99999999999997, 3, 1.0, t, RULES.spec).medal == "gold"
    assert award(87.9999, 3, 1.0, t, RULES.spec).medal == "silver"
