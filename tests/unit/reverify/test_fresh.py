"""Fresh instances in re-verification: determined by the re-verifier's signature, checkable by anyone."""

from __future__ import annotations

import pytest

from trustscore.errors import InvalidInput, VerificationError
from trustscore.exams.generators import item_digest
from trustscore.ledger import keys
from trustscore.reverify import fresh

KEY = keys.SigningKey.from_seed(b"\x31" * 32)
OTHER = keys.SigningKey.from_seed(b"\x32" * 32)
SEED = b"\x44" * 32


def recorded(items: list[fresh.FreshItem]) -> list[tuple[str, str, str]]:
    return [(f.generator, f.item.id, f.digest) for f in items]


def test_a_plan_is_determined_by_the_key_and_the_run_seed() -> None:
    a = fresh.plan("capability@1", SEED, 5, KEY.sign)
    assert [f.digest for f in a] == [f.digest for f in fresh.plan("capability@1", SEED, 5, KEY.sign)]
    assert all(f.item.id.startswith(fresh.ITEM_PREFIX) and f.digest == item_digest(f.item) for f in a)
    assert {f.generator for f in a} <= set(fresh.generators_for("capability@1"))
    # Without the key nobody computes them: another key (or another run) gives other items.
    assert not {f.digest for f in a} & {f.digest for f in fresh.plan("capability@1", SEED, 5, OTHER.sign)}
    assert not {f.digest for f in a} & {
        f.digest for f in fresh.plan("capability@1", b"\x45" * 32, 5, KEY.sign)
    }


def test_no_form_or_no_k_means_no_fresh_items() -> None:
    assert fresh.plan("probe@1", SEED, 3, KEY.sign) == []
    assert fresh.plan("security@1", SEED, 0, KEY.sign) == []
    with pytest.raises(InvalidInput):
        fresh.message(b"short", 0)


def test_anyone_can_check_the_items_with_the_public_key() -> None:
    planned = fresh.plan("integrity@1", SEED, 4, KEY.sign)
    items = fresh.check("integrity@1", SEED, recorded(planned), KEY.public_key)
    assert [i.id for i in items] == [f.item.id for f in planned]


@pytest.mark.parametrize("tamper", ["key", "order", "digest", "generator", "id", "seed"])
def test_a_substituted_item_fails_the_check(tamper: str) -> None:
    rows = recorded(fresh.plan("capability@1", SEED, 3, KEY.sign))
    verifier, seed = KEY.public_key, SEED
    if tamper == "key":
        verifier = OTHER.public_key
    elif tamper == "order":
        rows = [rows[1], rows[0], rows[2]]
    elif tamper == "digest":
        rows[0] = (rows[0][0], rows[0][1], "sha256:" + "0" * 64)
    elif tamper == "generator":
        rows[0] = ("sequence@1" if rows[0][0] != "sequence@1" else "arithmetic@1", rows[0][1], rows[0][2])
    elif tamper == "id":
        rows[0] = (rows[0][0], "fresh-!!", rows[0][2])
    else:
        seed = b"\x45" * 32
    with pytest.raises(VerificationError):
        fresh.check("capability@1", seed, rows, verifier)
