"""fsck of a database streams the log in batches and finds tampered rows (with the triggers bypassed)."""

from __future__ import annotations

import asyncpg
import msgspec
import pytest

from tests.helpers import new_card
from trustscore.ledger import checkpoint, keys, note
from trustscore.ledger.submission import check, prepare
from trustscore.services.audit import fsck_database
from trustscore.store import db
from trustscore.store.log import LogStore

LOG_KEY = keys.SigningKey.from_seed(b"\x07" * 32)
ORIGIN = "test/fsck"
VERIFIER = note.verifier_for(ORIGIN, LOG_KEY.public_key)


def sign(size: int, root: bytes) -> str:
    return checkpoint.sign_checkpoint(checkpoint.Checkpoint(ORIGIN, size, root), LOG_KEY, ORIGIN)


async def fill(dsn: str, n: int) -> None:
    await db.migrate(dsn)
    pool = await db.create_pool(dsn, min_size=1, max_size=2)
    try:
        s = LogStore(pool)
        for start in range(0, n, 7):  # several checkpoints along the way
            entries = [
                prepare(msgspec.to_builtins(new_card(f"a{i}")[1])) for i in range(start, min(n, start + 7))
            ]
            await s.append([check(p, lambda _k: None) for p in entries])
            await s.integrate(sign, max_batch=1000)
    finally:
        await pool.close()


async def test_streamed_fsck_of_a_clean_log(dsn: str) -> None:
    await fill(dsn, 45)
    for batch in (1, 4, 1000):
        report = await fsck_database(dsn, VERIFIER, batch=batch)
        assert report.clean and report.root_matches, report.problems
        assert (report.entries, report.checkpoint_size) == (45, 45)


@pytest.mark.parametrize(
    ("tamper", "problem"),
    [
        ("UPDATE tree_nodes SET hash = sha256(hash) WHERE level = 1 AND idx = 5", "stored tree node (1, 5)"),
        ("UPDATE entries SET leaf_hash = sha256(leaf_hash) WHERE idx = 9", "entry 9: stored leaf hash"),
        # The columns kept beside each leaf, which lookups (an agent's cards by subject and kind), the
        # /log list and duplicate and replay checks read without parsing it.
        ("UPDATE entries SET subject = 'ts1_' || subject WHERE idx = 11", "entry 11: stored subject"),
        ("UPDATE entries SET kind = kind || '2' WHERE idx = 12", "entry 12: stored kind"),
        ("UPDATE entries SET signer = 'ts1_' || signer WHERE idx = 13", "entry 13: stored signer"),
        ("UPDATE entries SET nonce = nonce || 'x' WHERE idx = 16", "entry 16: stored nonce"),
        (
            "UPDATE entries SET statement_hash = sha256(statement_hash) WHERE idx = 17",
            "entry 17: stored statement_hash",
        ),
        (
            "UPDATE checkpoints SET root = sha256(root) WHERE size = 14",
            "checkpoint 14: signed note does not match",
        ),
    ],
)
async def test_tampered_rows_are_found(dsn: str, tamper: str, problem: str) -> None:
    await fill(dsn, 30)
    conn = await asyncpg.connect(dsn)
    try:
        table = tamper.split()[1]
        await conn.execute(f"ALTER TABLE {table} DISABLE TRIGGER USER")
        await conn.execute(tamper)
    finally:
        await conn.close()
    report = await fsck_database(dsn, VERIFIER, batch=4)
    assert not report.clean
    assert any(p.startswith(problem) for p in report.problems), report.problems


async def test_a_column_wrong_everywhere_is_listed_twenty_times_then_counted(dsn: str) -> None:
    await fill(dsn, 30)
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute("ALTER TABLE entries DISABLE TRIGGER USER")
        await conn.execute("UPDATE entries SET kind = kind || '2'")
    finally:
        await conn.close()
    problems = (await fsck_database(dsn, VERIFIER, batch=4)).problems
    assert sum("stored kind does not match" in p for p in problems) == 20
    assert "10 more stored columns do not match their leaves" in problems
