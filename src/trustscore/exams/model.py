"""The exam set file format (JSON, ``schema_version`` 1)."""

from __future__ import annotations

import msgspec

from trustscore.grading.model import Item, Tier

SCHEMA_VERSION = 1


class ExamFile(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """What an exam set file holds; see docs/exams.md for every field."""

    schema_version: int
    name: str
    version: int
    dimension: str
    tier: Tier
    description: str
    instructions: str
    items: list[Item]
    default_timeout_ms: int = 60_000


class ExamSet(msgspec.Struct, frozen=True):
    """A loaded exam set with the SHA-256 of its file's exact bytes."""

    file: ExamFile
    digest: str  # "sha256:<hex>"

    @property
    def id(self) -> str:
        return f"{self.file.name}@{self.file.version}"

    @property
    def name(self) -> str:
        return self.file.name

    @property
    def version(self) -> int:
        return self.file.version

    @property
    def items(self) -> list[Item]:
        return self.file.items

    def item(self, item_id: str) -> Item | None:
        return next((i for i in self.file.items if i.id == item_id), None)

    def timeout_ms(self, item: Item) -> int:
        return item.timeout_ms or self.file.default_timeout_ms
