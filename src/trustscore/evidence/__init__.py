"""From log statements to scoring evidence: a pure, deterministic mapping (docs/evidence-mapping.md).

``derive`` turns one admitted log statement into evidence items for the scoring engine;
``derive_snapshots`` turns a rating snapshot into the engine's snapshots; ``ReporterWeights`` weights a
counterparty's reports by its own rating as of the report; ``jsonl`` writes the lines the offline
``trustscore score`` reads, so ratings can be recomputed from a log export.
"""

from trustscore.evidence.derive import (
    Context,
    DerivedLog,
    derive,
    derive_log,
    derive_snapshots,
    evidence_batch,
)
from trustscore.evidence.reporters import ReporterWeights
from trustscore.scoring.inputs import DerivedEvidence

__all__ = [
    "Context",
    "DerivedEvidence",
    "DerivedLog",
    "ReporterWeights",
    "derive",
    "derive_log",
    "derive_snapshots",
    "evidence_batch",
]
