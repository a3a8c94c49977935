"""Evidence and snapshot JSON Lines, parsed into batches with every bad line reported by number.

Parsing is strict and loses nothing: unknown fields, bad times, non-finite values, lines with neither a
value nor a result, dimensions the model does not have and blank lines are all errors, collected (not
raised one by one) so a caller can report each. ``seq`` of an evidence row is its line number.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import TypeVar

import msgspec

from trustscore.errors import InvalidInput
from trustscore.scoring.inputs import (
    EvidenceBatch,
    EvidenceBuilder,
    EvidenceFields,
    SnapshotBatch,
    SnapshotBuilder,
)
from trustscore.scoring.times import parse_time

T = TypeVar("T")


class EvidenceLine(EvidenceFields[str], forbid_unknown_fields=True, frozen=True, kw_only=True):
    """One evidence row: the evidence fields with ``at`` as the RFC 3339 text written on the line."""


class SnapshotLine(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    agent: str
    at: str
    total: int | None
    model_version: str


@dataclass(frozen=True)
class LineError:
    line: int  # 1-based
    message: str


_evidence_decoder = msgspec.json.Decoder(EvidenceLine)
_snapshot_decoder = msgspec.json.Decoder(SnapshotLine)


def _lines(data: bytes) -> list[bytes]:
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()  # the newline that ends the last line
    return lines


def parse_evidence(data: bytes, *, dimensions: Collection[str]) -> tuple[EvidenceBatch, list[LineError]]:
    """The evidence in ``data`` and the errors of its bad lines (each bad line is left out of the batch)."""
    builder = EvidenceBuilder()
    errors: list[LineError] = []
    for number, line in enumerate(_lines(data), start=1):
        try:
            item = _decode(_evidence_decoder, line)
            if not item.agent:
                raise InvalidInput("agent must not be empty")
            if item.dimension not in dimensions:
                raise InvalidInput(f"unknown dimension {item.dimension!r}")
            builder.add(item, at=parse_time(item.at), seq=number)
        except (msgspec.DecodeError, InvalidInput) as exc:
            errors.append(LineError(number, _message(exc)))
    return builder.build(), errors


def parse_snapshots(data: bytes) -> tuple[SnapshotBatch, list[LineError]]:
    builder = SnapshotBuilder()
    errors: list[LineError] = []
    for number, line in enumerate(_lines(data), start=1):
        try:
            item = _decode(_snapshot_decoder, line)
            if not item.agent:
                raise InvalidInput("agent must not be empty")
            builder.add(item.agent, parse_time(item.at), item.total, item.model_version)
        except (msgspec.DecodeError, InvalidInput) as exc:
            errors.append(LineError(number, _message(exc)))
    return builder.build(), errors


def _decode(decoder: msgspec.json.Decoder[T], line: bytes) -> T:
    if not line.strip():
        raise InvalidInput("empty line")
    return decoder.decode(line)


def _message(exc: Exception) -> str:
    return exc.message if isinstance(exc, InvalidInput) else str(exc)
