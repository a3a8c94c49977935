"""Load and check exam set files; find them by ``name@version`` in the public and private directories.

Layout: ``<dir>/<name>/v<version>.json``. The public directory ships in the repository (``exams/``);
the private directory is configured by the operator (``TRUSTSCORE_PRIVATE_EXAMS_DIR``) and never
published. A set's digest is the SHA-256 of its file's exact bytes.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

import msgspec

from trustscore import resources
from trustscore.errors import InvalidInput, NotFound, UnsupportedKind
from trustscore.exams.model import SCHEMA_VERSION, ExamFile, ExamSet
from trustscore.grading.model import Tier
from trustscore.grading.registry import get_grader
from trustscore.kinds.reverification.sampling import FRESH_ITEM_PREFIX

_NAME = re.compile(r"^[a-z][a-z0-9-]{0,63}$")
_ITEM_ID = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")
_REF = re.compile(r"^(?P<name>[a-z][a-z0-9-]{0,63})@(?P<version>[1-9][0-9]{0,5})$")
DEFAULT_PUBLIC_DIR = resources.path("exams")


@dataclass(frozen=True)
class ExamDirs:
    """Where exam sets live; built once from the environment and passed in."""

    public: Path = DEFAULT_PUBLIC_DIR
    private: Path | None = None

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> ExamDirs:
        env = dict(os.environ) if env is None else env
        public = Path(env["TRUSTSCORE_EXAMS_DIR"]) if env.get("TRUSTSCORE_EXAMS_DIR") else DEFAULT_PUBLIC_DIR
        private = env.get("TRUSTSCORE_PRIVATE_EXAMS_DIR")
        return cls(public, Path(private) if private else None)


def digest_of(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def parse_ref(ref: str) -> tuple[str, int]:
    """``capability@1`` -> (``capability``, 1)."""
    m = _REF.match(ref)
    if not m:
        raise InvalidInput(f"exam reference {ref!r} is not NAME@VERSION (e.g. capability@1)")
    return m.group("name"), int(m.group("version"))


def parse_exam(data: bytes, *, source: str = "exam file", tier: Tier | None = None) -> ExamSet:
    """Parse and check an exam file's bytes; every problem raises naming ``source`` and the place."""
    try:
        head = msgspec.json.decode(data)
    except msgspec.DecodeError as exc:
        raise InvalidInput(f"{source}: not valid JSON: {exc}") from exc
    if not isinstance(head, dict) or "schema_version" not in head:
        raise InvalidInput(f"{source}: missing schema_version")
    sv = head["schema_version"]
    if not isinstance(sv, int) or isinstance(sv, bool) or sv != SCHEMA_VERSION:
        raise UnsupportedKind(
            f"{source}: schema_version {sv!r} is not supported (this reader knows {SCHEMA_VERSION})"
        )
    try:
        exam = msgspec.json.decode(data, type=ExamFile)
    except msgspec.ValidationError as exc:
        raise InvalidInput(f"{source}: {exc}") from exc
    _check(exam, source, tier)
    return ExamSet(exam, digest_of(data))


def _check(exam: ExamFile, source: str, tier: Tier | None) -> None:
    if not _NAME.match(exam.name) or exam.version < 1:
        raise InvalidInput(f"{source}: bad name {exam.name!r} or version {exam.version!r}")
    if tier is not None and exam.tier != tier:
        raise InvalidInput(f"{source}: a {tier} directory holds a set marked tier {exam.tier!r}")
    if not exam.items:
        raise InvalidInput(f"{source}: has no items")
    seen: set[str] = set()
    for item in exam.items:
        where = f"{source}: item {item.id!r}"
        if not _ITEM_ID.match(item.id):
            raise InvalidInput(f"{where}: ids are 1..64 of a-z, 0-9 and '-'")
        if item.id.startswith(FRESH_ITEM_PREFIX):  # (re-verification's generated items are named so)
            raise InvalidInput(
                f"{where}: ids starting {FRESH_ITEM_PREFIX!r} are reserved for fresh instances"
            )
        if item.id in seen:
            raise InvalidInput(f"{where}: duplicate item id")
        seen.add(item.id)
        if item.tier != exam.tier:
            raise InvalidInput(f"{where}: tier {item.tier!r} differs from the set's {exam.tier!r}")
        if not item.ask.prompts or not all(p.strip() for p in item.ask.prompts):
            raise InvalidInput(f"{where}: needs non-empty prompts")
        if item.ask.kind != "paraphrase" and len(item.ask.prompts) != 1:
            raise InvalidInput(f"{where}: a {item.ask.kind} ask has exactly one prompt")
        if item.ask.kind != "repeat" and item.ask.times != 1:
            raise InvalidInput(f"{where}: only repeat asks set times")
        if item.timeout_ms is not None and item.timeout_ms <= 0:
            raise InvalidInput(f"{where}: timeout_ms must be positive")
        try:
            grader = get_grader(item.grader)
        except UnsupportedKind as exc:
            raise UnsupportedKind(f"{where}: {exc.message}") from exc
        try:
            grader.check(item)
        except InvalidInput as exc:
            raise InvalidInput(f"{source}: {exc.message}") from exc


# Parsed exam sets by (path, tier), stamped with the file's inode, size, mtime and ctime: the server
# loads the set of every report it re-grades, and parsing and checking a set costs far more than a stat.
# A file that is rewritten or replaced is parsed again (ctime moves even when a copy keeps the mtime).
_parsed: dict[tuple[Path, Tier | None], tuple[tuple[int, int, int, int], ExamSet]] = {}


def load_file(path: Path, *, tier: Tier | None = None) -> ExamSet:
    try:
        st = path.stat()
        stamp = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        cached = _parsed.get((path, tier))
        if cached is not None and cached[0] == stamp:
            return cached[1]
        data = path.read_bytes()
    except FileNotFoundError as exc:
        raise NotFound(f"exam file {path} does not exist") from exc
    except OSError as exc:
        raise InvalidInput(f"cannot read exam file {path}: {exc.strerror}") from exc
    exam = parse_exam(data, source=str(path), tier=tier)
    _parsed[(path, tier)] = (stamp, exam)
    return exam


def _path(base: Path, name: str, version: int) -> Path:
    return base / name / f"v{version}.json"


def load_exam(ref: str, dirs: ExamDirs) -> ExamSet:
    """Load ``name@version`` from the public directory, else the private one; the file must agree."""
    name, version = parse_ref(ref)
    candidates: list[tuple[Path, Tier]] = [(_path(dirs.public, name, version), "public")]
    if dirs.private is not None:
        candidates.append((_path(dirs.private, name, version), "private"))
    for path, tier in candidates:
        if path.is_file():
            exam = load_file(path, tier=tier)
            if (exam.name, exam.version) != (name, version):
                raise InvalidInput(f"{path}: holds {exam.id}, not {ref}")
            return exam
    raise NotFound(f"exam set {ref} not found (looked in {', '.join(str(p) for p, _ in candidates)})")


def list_exams(dirs: ExamDirs) -> list[ExamSet]:
    """Every exam set in the configured directories, sorted by tier, name and version."""
    found: list[ExamSet] = []
    bases: list[tuple[Path, Tier]] = [(dirs.public, "public")]
    if dirs.private is not None:
        bases.append((dirs.private, "private"))
    for base, tier in bases:
        if not base.is_dir():
            continue
        for path in sorted(base.glob("*/v*.json")):
            found.append(load_file(path, tier=tier))
    return sorted(found, key=lambda e: (e.file.tier, e.name, e.version))
