"""What the engine reads: evidence and snapshots, as plain structs or as columnar numpy batches.

The engine works on :class:`EvidenceBatch` and :class:`SnapshotBatch`, where strings are interned to
integer codes into small tables; :meth:`EvidenceBatch.from_items` builds one from plain structs. Codes
carry no meaning beyond equality (the engine re-ranks names itself), so any encoder gives the same
ratings.

``extra_weight`` is an optional per-item multiplier in [0, 1] (default 1.0) applied on top of the source
weight: the hook for weighting counterparty-reported evidence by the counterparty's own rating.
``seq`` orders items that share an agent, a key and a time: the later ``seq`` wins (the line number in a
file, the log index in the service).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

import msgspec
import numpy as np
from numpy.typing import NDArray

from trustscore.errors import InvalidInput
from trustscore.scoring.times import to_micros

Result = Literal["success", "partial", "failure"]
#: Codes of ``result`` in :class:`EvidenceBatch`; -1 is null.
RESULT_CODES: dict[str, int] = {"failure": 0, "partial": 1, "success": 2}

I64 = NDArray[np.int64]
F64 = NDArray[np.float64]


AtT = TypeVar("AtT")


class EvidenceFields(msgspec.Struct, Generic[AtT], frozen=True, kw_only=True):
    """The fields of one piece of evidence about an agent, spelled once for every shape that carries it:
    ``at`` is an aware datetime in memory (:class:`EvidenceItem`, :class:`DerivedEvidence`) and the RFC 3339
    text as written on a JSON Lines row (``scoring/parse_jsonl.py``)."""

    agent: str
    dimension: str
    source: str
    at: AtT
    value: float | None = None
    result: Result | None = None
    key: str | None = None
    issuer: str | None = None
    extra_weight: float = 1.0


class EvidenceItem(EvidenceFields[dt.datetime], frozen=True, kw_only=True):
    """One piece of evidence about an agent, as the methodology reads it."""


class DerivedEvidence(EvidenceItem, frozen=True, kw_only=True):
    """One evidence item and the log index of the statement it came from (the engine's ``seq``)."""

    index: int

    def to_item(self) -> EvidenceItem:
        """The item without its log index."""
        return EvidenceItem(**{f: getattr(self, f) for f in EvidenceItem.__struct_fields__})


class Snapshot(msgspec.Struct, frozen=True, kw_only=True):
    """A rating the old system published at a time, used for snapshot consistency."""

    agent: str
    at: dt.datetime
    total: int | None
    model_version: str


class _Interner:
    def __init__(self) -> None:
        self.codes: dict[str, int] = {}

    def __call__(self, name: str) -> int:
        code = self.codes.get(name)
        if code is None:
            code = self.codes[name] = len(self.codes)
        return code

    def table(self) -> tuple[str, ...]:
        return tuple(self.codes)


@dataclass(frozen=True)
class EvidenceBatch:
    """Evidence as columns. Null is -1 for codes and ``result``, NaN for ``value``."""

    agents: tuple[str, ...]
    dimensions: tuple[str, ...]
    sources: tuple[str, ...]
    issuers: tuple[str, ...]
    agent: I64
    dimension: I64
    source: I64
    issuer: I64
    key: I64  # equal codes mean equal keys; -1 is no key
    value: F64
    result: NDArray[np.int8]
    at: I64  # microseconds since the epoch
    extra_weight: F64
    seq: I64

    def __len__(self) -> int:
        return int(self.agent.shape[0])

    @classmethod
    def from_items(cls, items: Sequence[EvidenceItem], seq: Sequence[int] | None = None) -> EvidenceBatch:
        """Columns of ``items``; ``seq`` defaults to the position in ``items`` (a later item wins a tie)."""
        if seq is not None and len(seq) != len(items):
            raise InvalidInput("seq must have one entry per evidence item")
        builder = EvidenceBuilder()
        for position, item in enumerate(items):
            builder.add(item, at=to_micros(item.at), seq=position if seq is None else seq[position])
        return builder.build()

    def take(self, rows: I64) -> EvidenceBatch:
        """The rows ``rows`` (indexes) of this batch, with the same string tables."""
        return dataclasses.replace(self, **{c: getattr(self, c)[rows] for c in _EVIDENCE_COLUMNS})

    def check(self) -> None:
        """Raise :class:`InvalidInput` naming the first bad row, if any."""
        n = len(self)
        columns = (self.dimension, self.source, self.issuer, self.key, self.value, self.result, self.at)
        if any(c.shape != (n,) for c in (*columns, self.extra_weight, self.seq)):
            raise InvalidInput("evidence columns must all have the same length")
        for name, kinds in _EVIDENCE_KINDS.items():
            if np.asarray(getattr(self, name)).dtype.kind not in kinds:
                raise InvalidInput(f"evidence column {name} must hold {_KIND_NAMES[kinds]}")
        _check_range(self.agent, 0, len(self.agents) - 1, "agent code out of range")
        _check_range(self.dimension, 0, len(self.dimensions) - 1, "dimension code out of range")
        _check_range(self.source, 0, len(self.sources) - 1, "source code out of range")
        _check_range(self.issuer, -1, len(self.issuers) - 1, "issuer code out of range")
        _check_range(self.key, -1, None, "key code out of range")
        _check_range(self.result, -1, 2, "result code out of range")
        _check_rows(np.isinf(self.value), "value must be finite")
        _check_rows(np.isnan(self.value) & (self.result < 0), "needs a value or a result")
        extra = self.extra_weight
        if n and not (float(extra.min()) >= 0.0 and float(extra.max()) <= 1.0):  # NaN fails both
            _check_rows(~((extra >= 0.0) & (extra <= 1.0)), "extra_weight must be in [0, 1]")


@dataclass(frozen=True)
class SnapshotBatch:
    """Snapshots as columns; ``has_total`` is False where the snapshot's total is null."""

    agents: tuple[str, ...]
    model_versions: tuple[str, ...]
    agent: I64
    at: I64
    total: I64
    has_total: NDArray[np.bool_]
    model_version: I64

    def __len__(self) -> int:
        return int(self.agent.shape[0])

    @classmethod
    def from_items(cls, items: Iterable[Snapshot]) -> SnapshotBatch:
        builder = SnapshotBuilder()
        for item in items:
            builder.add(item.agent, to_micros(item.at), item.total, item.model_version)
        return builder.build()

    def take(self, rows: I64) -> SnapshotBatch:
        """The rows ``rows`` (indexes) of this batch, with the same string tables."""
        return dataclasses.replace(self, **{c: getattr(self, c)[rows] for c in _SNAPSHOT_COLUMNS})

    @classmethod
    def empty(cls) -> SnapshotBatch:
        return SnapshotBuilder().build()

    def check(self) -> None:
        n = len(self)
        if any(c.shape != (n,) for c in (self.at, self.total, self.has_total, self.model_version)):
            raise InvalidInput("snapshot columns must all have the same length")
        _check_rows((self.agent < 0) | (self.agent >= len(self.agents)), "agent code out of range")
        bad_version = (self.model_version < 0) | (self.model_version >= len(self.model_versions))
        _check_rows(bad_version, "model_version code out of range")
        # Totals beyond 2**53 would not convert to float64 exactly.
        _check_rows(self.has_total & (np.abs(self.total) > 2**53), "total out of range")


#: The dtype kinds the code columns may have: integers (a float code cannot index a table), and the key
#: signed (the engine pairs it with the agent in int64). Times, sequence numbers and values may be any
#: numbers the engine can compute with.
_EVIDENCE_KINDS = {
    "agent": "iu",
    "dimension": "iu",
    "source": "iu",
    "issuer": "iu",
    "result": "iu",
    "key": "i",
}
_KIND_NAMES = {"iu": "integers", "i": "signed integers"}

_EVIDENCE_COLUMNS = (
    "agent",
    "dimension",
    "source",
    "issuer",
    "key",
    "value",
    "result",
    "at",
    "extra_weight",
    "seq",
)
_SNAPSHOT_COLUMNS = ("agent", "at", "total", "has_total", "model_version")


def _check_range(codes: NDArray[np.integer], low: int, high: int | None, message: str) -> None:
    """Like :func:`_check_rows` for ``low <= codes <= high``, with one min/max pass when all are in range."""
    if codes.size == 0:
        return
    if int(codes.min()) < low or (high is not None and int(codes.max()) > high):
        _check_rows((codes < low) | (codes > (high if high is not None else np.iinfo(np.int64).max)), message)


def _check_rows(bad: NDArray[np.bool_], message: str) -> None:
    rows = np.flatnonzero(bad)
    if rows.size:
        raise InvalidInput(f"row {int(rows[0])}: {message} ({rows.size} rows)", row=int(rows[0]))


class EvidenceBuilder:
    """Appends evidence one row at a time and interns its strings; :meth:`build` makes the batch."""

    def __init__(self) -> None:
        self._agents, self._dimensions, self._sources = _Interner(), _Interner(), _Interner()
        self._issuers, self._keys = _Interner(), _Interner()
        self._agent: list[int] = []
        self._dimension: list[int] = []
        self._source: list[int] = []
        self._issuer: list[int] = []
        self._key: list[int] = []
        self._value: list[float] = []
        self._result: list[int] = []
        self._at: list[int] = []
        self._extra: list[float] = []
        self._seq: list[int] = []

    def __len__(self) -> int:
        return len(self._agent)

    def add(self, item: EvidenceFields[Any], *, at: int, seq: int) -> None:
        """Append ``item`` with its time ``at`` in microseconds since the epoch and its tie-break ``seq``."""
        agent, dimension, source, value, result = (
            item.agent,
            item.dimension,
            item.source,
            item.value,
            item.result,
        )
        key, issuer, extra_weight = item.key, item.issuer, item.extra_weight
        if value is not None and not math.isfinite(value):
            raise InvalidInput("value must be a finite number")
        if value is None and result is None:
            raise InvalidInput("evidence needs a value or a result")
        if not 0.0 <= extra_weight <= 1.0:
            raise InvalidInput("extra_weight must be in [0, 1]")
        self._agent.append(self._agents(agent))
        self._dimension.append(self._dimensions(dimension))
        self._source.append(self._sources(source))
        self._issuer.append(-1 if issuer is None else self._issuers(issuer))
        self._key.append(-1 if key is None else self._keys(key))
        self._value.append(math.nan if value is None else float(value))
        self._result.append(-1 if result is None else RESULT_CODES[result])
        self._at.append(at)
        self._extra.append(float(extra_weight))
        self._seq.append(seq)

    def build(self) -> EvidenceBatch:
        return EvidenceBatch(
            agents=self._agents.table(),
            dimensions=self._dimensions.table(),
            sources=self._sources.table(),
            issuers=self._issuers.table(),
            agent=np.asarray(self._agent, dtype=np.int64),
            dimension=np.asarray(self._dimension, dtype=np.int64),
            source=np.asarray(self._source, dtype=np.int64),
            issuer=np.asarray(self._issuer, dtype=np.int64),
            key=np.asarray(self._key, dtype=np.int64),
            value=np.asarray(self._value, dtype=np.float64),
            result=np.asarray(self._result, dtype=np.int8),
            at=np.asarray(self._at, dtype=np.int64),
            extra_weight=np.asarray(self._extra, dtype=np.float64),
            seq=np.asarray(self._seq, dtype=np.int64),
        )


class SnapshotBuilder:
    def __init__(self) -> None:
        self._agents, self._versions = _Interner(), _Interner()
        self._agent: list[int] = []
        self._at: list[int] = []
        self._total: list[int] = []
        self._has_total: list[bool] = []
        self._version: list[int] = []

    def add(self, agent: str, at: int, total: int | None, model_version: str) -> None:
        if total is not None and abs(total) > 2**53:
            raise InvalidInput("snapshot total out of range")
        self._agent.append(self._agents(agent))
        self._at.append(at)
        self._total.append(0 if total is None else total)
        self._has_total.append(total is not None)
        self._version.append(self._versions(model_version))

    def build(self) -> SnapshotBatch:
        return SnapshotBatch(
            agents=self._agents.table(),
            model_versions=self._versions.table(),
            agent=np.asarray(self._agent, dtype=np.int64),
            at=np.asarray(self._at, dtype=np.int64),
            total=np.asarray(self._total, dtype=np.int64),
            has_total=np.asarray(self._has_total, dtype=np.bool_),
            model_version=np.asarray(self._version, dtype=np.int64),
        )
