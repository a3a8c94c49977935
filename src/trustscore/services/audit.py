"""fsck of a database: stream every entry and stored node through :class:`trustscore.ledger.audit.Fsck`.

Everything is read in one repeatable-read, read-only snapshot, ``batch`` entries at a time, so memory stays
bounded by the batch (plus the registered keys) however long the log is. Besides what the pure check
does, an operator's fsck checks every stored checkpoint's signature, that the stored checkpoints match
their signed notes, that entry indexes are contiguous and every stored leaf hash and tree node, that the
columns kept beside each leaf (statement hash, signer, nonce, kind, subject) are its leaf's, and that
every stored full hash tile repeats its tree nodes.
"""

from __future__ import annotations

import asyncpg

from trustscore.errors import StorageError, VerificationError
from trustscore.ledger import audit, checkpoint, keys, note
from trustscore.store import log as store

DEFAULT_BATCH = 10_000


async def fsck_database(
    dsn: str, given: note.Verifier | None, batch: int = DEFAULT_BATCH
) -> audit.FsckReport:
    """Audit the log in the database at ``dsn`` against ``given`` (default: the key the database names)."""
    try:
        conn = await asyncpg.connect(dsn)
    except (OSError, asyncpg.PostgresError) as exc:
        raise StorageError(f"cannot connect to PostgreSQL: {exc}") from exc
    try:
        async with conn.transaction(isolation="repeatable_read", readonly=True):
            return await _fsck(conn, given, batch)
    finally:
        await conn.close()


async def _fsck(conn: asyncpg.Connection, given: note.Verifier | None, batch: int) -> audit.FsckReport:
    named = await store.stored_verifier_key(conn)
    if given is None and named is None:
        raise VerificationError("the database names no log verifier key; pass --verifier-key")
    verifier = given or note.parse_verifier_key(named or "")
    problems: list[str] = []
    cps: list[tuple[int, bytes]] = []
    for c in await store.stored_checkpoints(conn):
        try:
            opened = checkpoint.open_checkpoint(c.signed_note, verifier, None)
        except VerificationError as exc:
            problems.append(f"checkpoint {c.size}: {exc.message}")
            continue
        if (opened.size, opened.root) != (c.size, c.root):
            problems.append(f"checkpoint {c.size}: signed note does not match the stored size/root")
        cps.append((opened.size, opened.root))
    check = audit.Fsck(cps, {keys.key_id(verifier.public_key): verifier.public_key})
    contiguous = True
    async for rows in store.entry_batches(conn, batch):
        if contiguous and [e.index for e, _ in rows] != list(range(check.size, check.size + len(rows))):
            problems.append(f"entry indexes are not contiguous after {check.size}")
            contiguous = False
        completed = check.feed(
            [e.leaf for e, _ in rows], [e.leaf_hash for e, _ in rows], [c for _, c in rows]
        )
        if completed:
            check.compare_nodes(
                completed, await store.stored_nodes(conn, [(lv, i) for lv, i, _ in completed])
            )
    problems += await store.side_table_problems(conn)
    problems += await store.hash_tile_problems(conn)
    report = check.finish()
    report.problems[:0] = problems
    return report
