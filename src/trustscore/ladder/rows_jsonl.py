"""Ladder rows as JSON Lines: what ``trustscore evidence export --ladder-out`` writes and ``trustscore
stats --ladder`` reads, so the rungs and stats can be recomputed offline from a verified log."""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from trustscore.errors import InvalidInput
from trustscore.ladder.rows import LadderRow
from trustscore.ladder.rule import RUNG_NAMES

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(LadderRow)
MAX_LINE = 64 * 1024


def ladder_jsonl(rows: Iterable[LadderRow]) -> bytes:
    return b"".join(_encoder.encode(r) + b"\n" for r in rows)


def parse_ladder_jsonl(data: bytes) -> list[LadderRow]:
    """The rows of a ladder file; the first bad line is an error naming its number."""
    out = []
    for n, line in enumerate(data.splitlines(), 1):
        if len(line) > MAX_LINE:
            raise InvalidInput(f"ladder line {n}: longer than {MAX_LINE} bytes")
        try:
            row = _decoder.decode(line)
        except msgspec.DecodeError as exc:
            raise InvalidInput(f"ladder line {n}: {exc}") from exc
        if not 0 <= row.rung < len(RUNG_NAMES):
            raise InvalidInput(f"ladder line {n}: rung must be 0..{len(RUNG_NAMES) - 1}")
        out.append(row)
    return out
