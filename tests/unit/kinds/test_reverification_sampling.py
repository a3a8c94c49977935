"""The seed and sample: deterministic, bound to the log, and rechecked exactly."""

from __future__ import annotations

import hashlib
import random

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.unit.reverify.kit import AGENT, REPORT_SHA, ROOT, item, statement
from trustscore.errors import InvalidInput, VerificationError
from trustscore.kinds.reverification import sampling
from trustscore.reverify.recheck import recheck

IDS = [f"cap-{n:03d}" for n in range(43)]


def test_seed_is_sha256_of_the_documented_encoding() -> None:
    agent = AGENT.id.encode()
    expected = hashlib.sha256(
        b"trustscore/reverify/seed/v1\x00" + ROOT + REPORT_SHA + len(agent).to_bytes(2, "big") + agent
    ).digest()
    assert sampling.seed(ROOT, REPORT_SHA, AGENT.id) == expected


def test_seed_depends_on_root_report_and_agent() -> None:
    base = sampling.seed(ROOT, REPORT_SHA, AGENT.id)
    other = hashlib.sha256(b"other").digest()
    assert sampling.seed(other, REPORT_SHA, AGENT.id) != base
    assert sampling.seed(ROOT, other, AGENT.id) != base
    assert sampling.seed(ROOT, REPORT_SHA, "ts1_" + "0" * 40) != base


def test_seed_refuses_malformed_inputs() -> None:
    with pytest.raises(InvalidInput, match="32-byte"):
        sampling.seed(ROOT[:31], REPORT_SHA, AGENT.id)
    with pytest.raises(InvalidInput, match="agent"):
        sampling.seed(ROOT, REPORT_SHA, "")


def test_sample_is_deterministic_and_uses_no_random_state(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*_: object, **__: object) -> None:
        raise AssertionError("sampling must not touch the random module")

    for name in ("random", "shuffle", "sample", "choice", "seed", "getrandbits"):
        monkeypatch.setattr(random, name, boom)
    s = sampling.seed(ROOT, REPORT_SHA, AGENT.id)
    first = sampling.sample(IDS, 10, s)
    assert first == sampling.sample(IDS, 10, s) == sampling.sample(list(reversed(IDS)), 10, s)
    assert first == sorted(IDS, key=lambda i: hashlib.sha256(s + i.encode()).digest())[:10]


def test_different_roots_give_different_samples() -> None:
    samples = {
        tuple(
            sampling.sample(IDS, 5, sampling.seed(hashlib.sha256(bytes([n])).digest(), REPORT_SHA, AGENT.id))
        )
        for n in range(50)
    }
    assert len(samples) >= 48  # C(43, 5) ~ 962 598 possible samples; collisions are very unlikely


def test_sample_sizes() -> None:
    s = sampling.seed(ROOT, REPORT_SHA, AGENT.id)
    assert sampling.sample(IDS, 0, s) == []
    assert sorted(sampling.sample(IDS, 100, s)) == sorted(IDS)
    with pytest.raises(InvalidInput, match="k must be"):
        sampling.sample(IDS, -1, s)
    with pytest.raises(InvalidInput, match="twice"):
        sampling.sample(["a", "a"], 1, s)


@given(
    st.sets(st.text(min_size=1, max_size=8), max_size=30),
    st.integers(0, 35),
    st.binary(min_size=32, max_size=32),
)
def test_sample_is_a_prefix_closed_subset(ids: set[str], k: int, s: bytes) -> None:
    items = sorted(ids)
    got = sampling.sample(items, k, s)
    assert len(got) == min(k, len(items)) and set(got) <= ids
    assert sampling.sample(items, k + 1, s)[: len(got)] == got


def _honest() -> tuple[list[str], object]:
    s = sampling.seed(ROOT, REPORT_SHA, AGENT.id)
    chosen = sampling.sample(IDS, 10, s)
    return chosen, statement(items=[item(i, 1000, 1000) for i in chosen])


def _recheck(r: object, **kw: object) -> list[str]:
    fields: dict[str, object] = {
        "report_index": 5,
        "report_sha256": REPORT_SHA,
        "report_item_ids": IDS,
        "agent": AGENT.id,
        "checkpoint_size": 7,
        "checkpoint_root": ROOT,
        "statement": r,
    }
    fields.update(kw)
    return recheck(**fields)  # type: ignore[arg-type]


def test_recheck_accepts_an_honest_run() -> None:
    chosen, r = _honest()
    assert _recheck(r) == chosen


def test_recheck_catches_a_cherry_picked_sample() -> None:
    chosen, _ = _honest()
    other = next(i for i in IDS if i not in chosen)
    picked = statement(items=[item(i, 1000, 1000) for i in [*chosen[:-1], other]])
    with pytest.raises(VerificationError, match="sampled items"):
        _recheck(picked)
    reordered = statement(items=[item(i, 1000, 1000) for i in reversed(chosen)])
    with pytest.raises(VerificationError, match="sampled items"):
        _recheck(reordered)


def test_recheck_catches_a_tampered_seed_or_root() -> None:
    _, r = _honest()
    tampered = msgspec.structs.replace(r, seed="00" * 32)  # type: ignore[type-var]
    with pytest.raises(VerificationError, match="seed"):
        _recheck(tampered)
    with pytest.raises(VerificationError, match=r"seed .* differs"):
        _recheck(r, checkpoint_root=hashlib.sha256(b"another tree").digest())


def test_recheck_catches_the_wrong_report_or_checkpoint() -> None:
    _, r = _honest()
    with pytest.raises(VerificationError, match="names report 5"):
        _recheck(r, report_index=4)
    with pytest.raises(VerificationError, match="checkpoint_size 7 is not 8"):
        _recheck(r, checkpoint_size=8)


def test_recheck_checks_the_private_sample_given_the_pool() -> None:
    from tests.unit.reverify.kit import private

    s = sampling.seed(ROOT, REPORT_SHA, AGENT.id)
    pool = [sampling.private_ref("probe@1", f"p-{n}") for n in range(20)]
    chosen_private = sampling.sample(pool, 3, sampling.private_seed(s))
    chosen = sampling.sample(IDS, 10, s)
    good = statement(
        items=[item(i, 1000, 1000) for i in chosen],
        private_items=[private(ref.split(":")[1], 1000) for ref in chosen_private],
    )
    _recheck(good, private_pool=pool)
    bad = statement(
        items=[item(i, 1000, 1000) for i in chosen],
        private_items=[private(f"p-{n}", 1000) for n in range(3)],
    )
    if [f"probe@1:p-{n}" for n in range(3)] != chosen_private:
        with pytest.raises(VerificationError, match="private sample"):
            _recheck(bad, private_pool=pool)
