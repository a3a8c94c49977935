"""Evidence and snapshot lines in exactly the JSON Lines format ``trustscore score`` reads.

Lines are encoded with the parser's own structs (:mod:`trustscore.scoring.parse_jsonl`), so a log export
always parses. The parser uses a row's line number as its ``seq`` (a later row wins a tie between two
rows of one agent, key and time), so write evidence in log order: :func:`evidence_jsonl` keeps the order
it is given, and ``derive_log`` gives log order.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from trustscore.scoring.inputs import DerivedEvidence, Snapshot
from trustscore.scoring.parse_jsonl import EvidenceLine, SnapshotLine
from trustscore.scoring.times import format_time, to_micros

_encoder = msgspec.json.Encoder()


def to_jsonl_line(d: DerivedEvidence) -> str:
    """One evidence line (no newline); ``extra_weight`` included, which the scoring parser accepts."""
    fields = {f: getattr(d, f) for f in EvidenceLine.__struct_fields__}
    line = EvidenceLine(**(fields | {"at": format_time(to_micros(d.at))}))
    return _encoder.encode(line).decode("utf-8")


def snapshot_jsonl_line(s: Snapshot) -> str:
    """One snapshot line (no newline)."""
    line = SnapshotLine(
        agent=s.agent, at=format_time(to_micros(s.at)), total=s.total, model_version=s.model_version
    )
    return _encoder.encode(line).decode("utf-8")


def evidence_jsonl(items: Iterable[DerivedEvidence]) -> bytes:
    """A whole evidence file: one line per item, in the given order, each ending in a newline."""
    return "".join(to_jsonl_line(d) + "\n" for d in items).encode("utf-8")


def snapshots_jsonl(items: Iterable[Snapshot]) -> bytes:
    return "".join(snapshot_jsonl_line(s) + "\n" for s in items).encode("utf-8")
