"""Prometheus metrics of one app instance (its own registry, so several apps can live in one process)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.ingest_seconds = Histogram(
            "trustscore_ingest_seconds",
            "Time to verify and append one submission",
            ["route"],
            registry=r,
            buckets=_LATENCY_BUCKETS,
        )
        self.entries_appended = Counter(
            "trustscore_entries_appended_total", "Log entries appended (duplicates excluded)", registry=r
        )
        self.submissions_refused = Counter(
            "trustscore_submissions_refused_total",
            "Submissions refused, by problem code",
            ["code"],
            registry=r,
        )
        self.attestations_refused = Counter(
            "trustscore_attestations_refused_total",
            "Rating attestations refused, by problem code (too-large, rate-limited, busy)",
            ["code"],
            registry=r,
        )
        self.grading_seconds = Histogram(
            "trustscore_grading_seconds",
            "Time to re-grade one exam report",
            registry=r,
            buckets=_LATENCY_BUCKETS,
        )
        self.items_graded = Counter(
            "trustscore_items_graded_total", "Exam items re-graded by the server", registry=r
        )
        self.rating_seconds = Histogram(
            "trustscore_rating_seconds",
            "Time to recompute the ratings of a set of agents",
            registry=r,
            buckets=_LATENCY_BUCKETS,
        )
        self.integrated_size = Counter(
            "trustscore_integrated_entries_total", "Entries covered by signed checkpoints", registry=r
        )
        self.read_fallbacks = Counter(
            "trustscore_read_fallbacks_total",
            "Reads the read replica could not answer yet, answered by the primary, by kind",
            ["kind"],
            registry=r,
        )

        self.background_failures = Counter(
            "trustscore_background_failures_total",
            "Failed steps of background tasks (services/periodic.py) and failed scope and "
            "re-verification runs, by task",
            ["task"],
            registry=r,
        )

    def render(self) -> bytes:
        return generate_latest(self.registry)
