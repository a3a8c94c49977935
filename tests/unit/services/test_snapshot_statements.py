"""Snapshots of many agents are split over several statements taken at the same time."""

from __future__ import annotations

import datetime as dt

from trustscore.kinds.snapshots import RatingSnapshot
from trustscore.ledger import dsse, keys
from trustscore.ledger.statements import parse_statement
from trustscore.scoring.inputs import EvidenceItem
from trustscore.services.metrics import Metrics
from trustscore.services.ratings import RatingService, _AgentData, load_models
from trustscore.services.snapshots import snapshot_payloads

AT = dt.datetime(2026, 11, 30, 12, tzinfo=dt.UTC)


def test_every_rated_agent_once_per_model_in_chunks() -> None:
    ratings = RatingService(None, load_models(), Metrics(), clock=lambda: AT)  # type: ignore[arg-type]
    agents = [f"ts1_{i:040x}" for i in range(7)]
    for i, agent in enumerate(agents):
        item = EvidenceItem(
            agent=agent, dimension="capability", source="verified", at=AT, value=10.0 * i, key="q"
        )
        ratings._agents[agent] = _AgentData(evidence=[(i, item)])
    ratings.size = len(agents)
    ratings.recompute()
    key = keys.SigningKey.generate()
    payloads = snapshot_payloads(ratings, key, "2026-11-30T12:00:00Z", rows_per_statement=3)
    parsed = [parse_statement(p).predicate for p in payloads]  # each one a valid statement
    assert all(isinstance(s, RatingSnapshot) for s in parsed)
    by_model: dict[str, list[list[str]]] = {}
    for s in parsed:
        assert isinstance(s, RatingSnapshot)
        assert s.taken_at == "2026-11-30T12:00:00Z" and s.log_size == 7 and s.signer == key.id
        by_model.setdefault(s.model_version, []).append([r.agent for r in s.ratings])
    assert set(by_model) == set(ratings.models)
    for chunks in by_model.values():
        assert [len(c) for c in chunks] == [3, 3, 1]
        assert [a for c in chunks for a in c] == agents  # every agent once, in order
    assert len({s.nonce for s in parsed}) == len(parsed)  # distinct statements


def test_a_statement_holds_at_most_100_agents_so_bundles_stay_small() -> None:
    """Every attestation bundle carries each snapshot entry with a row for its agent, one per model per
    snapshot interval: at 1,000 rows a leaf was 113,008 bytes and an hourly snapshotted agent's bundle
    passed its 32 MiB bound in about 9 days; at 100 rows a leaf is ~12 KB."""
    ratings = RatingService(None, load_models(), Metrics(), clock=lambda: AT)  # type: ignore[arg-type]
    agents = [f"ts1_{i:040x}" for i in range(250)]
    for i, agent in enumerate(agents):
        item = EvidenceItem(agent=agent, dimension="capability", source="verified", at=AT, value=0.5, key="q")
        ratings._agents[agent] = _AgentData(evidence=[(i, item)])
    ratings.size = len(agents)
    ratings.recompute()
    key = keys.SigningKey.generate()
    payloads = snapshot_payloads(ratings, key, "2026-11-30T12:00:00Z")
    sizes: dict[str, list[int]] = {}
    for payload in payloads:
        s = parse_statement(payload).predicate
        assert isinstance(s, RatingSnapshot)
        sizes.setdefault(s.model_version, []).append(len(s.ratings))
        leaf = dsse.leaf_bytes(dsse.sign(payload, [key]))
        assert len(leaf) <= 13_000, len(leaf)
    assert sizes == {model: [100, 100, 50] for model in ratings.models}
