"""Every evidence item has a rung (docs/evidence-ladder.md), and rows leave the evidence untouched."""

from __future__ import annotations

from tests.unit.evidence.signed import TrustAll, busy_log
from trustscore.evidence import Context, derive
from trustscore.evidence.reporters import ReporterWeights
from trustscore.ladder.rows import ladder_rows


def test_every_derived_item_gets_one_row_with_the_mapped_rung() -> None:
    log = busy_log()
    weights = ReporterWeights()
    context = Context(reporter_weight=weights.weight, standing=TrustAll())
    seen = []
    for index, stmt in log.parsed():
        items = derive(index, stmt, context)
        before = list(items)
        rows = ladder_rows(index, stmt, items)
        assert items == before  # rows never change the evidence
        assert [(r.index, r.seq, r.dimension, r.agent) for r in rows] == [
            (d.index, n, d.dimension, d.agent) for n, d in enumerate(items)
        ]
        seen += [(stmt.kind.name, r.dimension, r.rung, r.attested) for r in rows]
        weights.feed(index, stmt)
    assert seen == [
        ("settlement", "delivery", 5, "confirmed"),  # delivery pass
        ("settlement", "economic", 5, "confirmed"),  # confirmed
        ("settlement", "delivery", 5, "confirmed"),  # late is still delivered
        ("settlement", "reliability", 5, "confirmed"),  # payment pass
        ("event", "delivery", 5, "confirmed"),  # delivered
        ("graded-evidence", "capability", 3, "server"),  # the grader passed it
        ("graded-evidence", "integrity", 2, "server"),  # answered, not passed
    ]
