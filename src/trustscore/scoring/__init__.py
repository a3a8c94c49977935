"""The scoring engine: ratings as a pure, reproducible function of evidence and a published weights file.

``score_agents`` (bulk) and ``score_agent`` (one agent) take plain structs or columnar batches and return
:class:`Rating` structs. The rules are public: ``docs/methodology.md``.
"""

from trustscore.scoring.inputs import EvidenceBatch, EvidenceItem, Snapshot, SnapshotBatch
from trustscore.scoring.ratings import DimensionStats, Rating, Uncertainty, score_agent, score_agents
from trustscore.scoring.weights import Weights, load_weights, parse_weights

__all__ = [
    "DimensionStats",
    "EvidenceBatch",
    "EvidenceItem",
    "Rating",
    "Snapshot",
    "SnapshotBatch",
    "Uncertainty",
    "Weights",
    "load_weights",
    "parse_weights",
    "score_agent",
    "score_agents",
]
