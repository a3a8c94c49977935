"""Read-only SQL for rating attestations: which log entries an agent's rating was computed from.

The log and its projections are append-only and every query is bounded by ``size`` (the projected log
size the rating reflects), so answers never change once given.
"""

from __future__ import annotations

from collections.abc import Iterable

import asyncpg


class AttestationStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool

    async def evidence_entries(self, agent: str, size: int) -> list[tuple[int, str | None]]:
        """(index, issuer) of every entry below ``size`` that gave ``agent`` evidence."""
        rows = await self.pool.fetch(
            "SELECT DISTINCT idx, issuer FROM evidence WHERE agent = $1 AND idx < $2 ORDER BY idx",
            agent,
            size,
        )
        return [(r["idx"], r["issuer"]) for r in rows]

    async def evidence_entry_count(self, agent: str, size: int, up_to: int) -> int:
        """How many entries below ``size`` gave ``agent`` evidence, counted up to ``up_to`` at most (the
        scan stops there)."""
        count: int = await self.pool.fetchval(
            "SELECT count(*) FROM (SELECT DISTINCT idx FROM evidence WHERE agent = $1 AND idx < $2 "
            "ORDER BY idx LIMIT $3) AS t",
            agent,
            size,
            up_to,
        )
        return count

    async def snapshot_entry_count(self, agent: str, model_version: str, size: int, up_to: int) -> int:
        """Like :meth:`snapshot_entries`, counted up to ``up_to`` at most (the scan stops there)."""
        count: int = await self.pool.fetchval(
            "SELECT count(*) FROM (SELECT idx FROM snapshots WHERE agent = $1 AND model_version = $2 "
            "AND idx < $3 LIMIT $4) AS t",
            agent,
            model_version,
            size,
            up_to,
        )
        return count

    async def snapshot_entries(self, agent: str, model_version: str, size: int) -> list[int]:
        """Every rating snapshot below ``size`` of ``model_version`` with a row for ``agent``."""
        rows = await self.pool.fetch(
            "SELECT idx FROM snapshots WHERE agent = $1 AND model_version = $2 AND idx < $3 ORDER BY idx",
            agent,
            model_version,
            size,
        )
        return [r["idx"] for r in rows]

    async def _per_report(self, reports: Iterable[tuple[int, str]], lateral: str, *args: object) -> list[int]:
        """The distinct non-null ``idx`` that ``lateral`` (a constant query over ``t.before`` and
        ``t.reporter``, parameters from $3) finds for each (report index, reporter), in index order."""
        pairs = sorted(set(reports))
        if not pairs:
            return []
        rows = await self.pool.fetch(
            "SELECT DISTINCT s.idx FROM unnest($1::bigint[], $2::text[]) AS t(before, reporter) "  # noqa: S608
            f"CROSS JOIN LATERAL ({lateral}) AS s WHERE s.idx IS NOT NULL ORDER BY s.idx",
            [i for i, _ in pairs],
            [r for _, r in pairs],
            *args,
        )
        return [r["idx"] for r in rows]

    async def newest_snapshots_before(
        self, reports: Iterable[tuple[int, str]], model_version: str
    ) -> list[int]:
        """For each (report index, issuer): the newest snapshot of ``model_version`` logged before the
        report with a row for the issuer (what weights the report); none where there is none."""
        return await self._per_report(
            reports,
            "SELECT max(idx) AS idx FROM snapshots WHERE agent = t.reporter AND model_version = $3 "
            "AND idx < t.before",
            model_version,
        )

    async def entry_signers(self, indexes: Iterable[int]) -> list[tuple[int, str]]:
        """(index, signer) of the entries at ``indexes``, in index order."""
        rows = await self.pool.fetch(
            "SELECT idx, signer FROM entries WHERE idx = ANY($1::bigint[]) ORDER BY idx", sorted(set(indexes))
        )
        return [(r["idx"], r["signer"]) for r in rows]

    async def first_rated_snapshots_before(
        self, reports: Iterable[tuple[int, str]], model_version: str, min_rating: int
    ) -> list[int]:
        """For each (report index, reporter): the first snapshot of ``model_version`` logged before the
        report that rates the reporter at least ``min_rating`` (adjusted, else total), which dates how long
        it has been well rated (standing)."""
        return await self._per_report(
            reports,
            "SELECT min(idx) AS idx FROM snapshots WHERE agent = t.reporter AND model_version = $3 "
            "AND idx < t.before AND COALESCE(adjusted, total) >= $4",
            model_version,
            min_rating,
        )

    async def first_vouches_before(
        self,
        reports: Iterable[tuple[int, str]],
        approval_kind: str,
        vouching: Iterable[str],
    ) -> list[int]:
        """For each (report index, reporter) and each of the operator's approval entries (``approval_kind``)
        before the report: the first success in a ``vouching`` dimension about the reporter from that
        marketplace after the approval entry and before the report (its vouch, standing-v2:
        ``standing.vouches``). One per approval entry covers the first success of every approved
        interval; one after a retirement is taken too (harmless: the approvals bundled say it does not
        vouch). Only a marketplace's own items are looked at, never the pool's or the re-verifier's."""
        return await self._per_report(
            reports,
            "SELECT f.idx AS idx FROM entries a CROSS JOIN LATERAL (SELECT e.idx FROM evidence e "
            "WHERE e.agent = t.reporter AND e.issuer = a.subject AND e.idx > a.idx AND e.idx < t.before "
            "AND e.dimension = ANY($4::text[]) AND e.result = 'success' ORDER BY e.idx LIMIT 1) f "
            "WHERE a.kind = $3 AND a.idx < t.before",
            approval_kind,
            sorted(set(vouching)),
        )

    async def approvals_of(self, marketplaces: Iterable[str], kind: str, size: int) -> list[int]:
        """The operator's approvals and retirements of ``marketplaces`` below ``size``."""
        rows = await self.pool.fetch(
            "SELECT idx FROM entries WHERE kind = $1 AND subject = ANY($2::text[]) AND idx < $3 ORDER BY idx",
            kind,
            sorted(set(marketplaces)),
            size,
        )
        return [r["idx"] for r in rows]

    async def signers(self, indexes: Iterable[int]) -> set[str]:
        """The signers of the entries at ``indexes``."""
        rows = await self.pool.fetch(
            "SELECT DISTINCT signer FROM entries WHERE idx = ANY($1::bigint[])", sorted(set(indexes))
        )
        return {r["signer"] for r in rows}

    async def registration_entries(self, ids: Iterable[str]) -> dict[str, int]:
        """The index of the card that registered each key among ``ids`` (unregistered ids are absent)."""
        rows = await self.pool.fetch(
            "SELECT k.id, k.first_idx FROM unnest($1::text[]) AS t(id) JOIN keys k ON k.id = t.id",
            sorted(set(ids)),
        )
        return {r["id"]: r["first_idx"] for r in rows}

    async def leaf_bytes(self, indexes: Iterable[int]) -> int:
        """The bytes of the leaves at ``indexes`` together, without reading them (``octet_length`` of a
        value stored out of line reads its length from the pointer)."""
        total: int = await self.pool.fetchval(
            "SELECT coalesce(sum(octet_length(leaf)), 0)::bigint FROM entries WHERE idx = ANY($1::bigint[])",
            sorted(set(indexes)),
        )
        return total

    async def leaves(self, indexes: Iterable[int]) -> list[tuple[int, bytes]]:
        rows = await self.pool.fetch(
            "SELECT idx, leaf FROM entries WHERE idx = ANY($1::bigint[]) ORDER BY idx", sorted(set(indexes))
        )
        return [(r["idx"], bytes(r["leaf"])) for r in rows]
