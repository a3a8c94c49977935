"""Harness transcripts to work records: an adapter interface and the Claude Code JSONL adapter. Pure.

An adapter turns the bytes of one transcript file into :class:`Session` drafts (no keys yet); the CLI
reads files, keeps drafts in a local index, computes their rungs with the same rule the server uses,
and can sign and submit them as self-attested ``work-record/v1`` statements.

``claude_code`` reads Claude Code's session logs (one JSON object per line; ``type`` ``user`` or
``assistant``; assistant ``message.content`` holds ``tool_use`` blocks, the next user line the matching
``tool_result``):

* a ``Bash`` command that looks like a test or build (pytest, cargo test/build, npm test, go test, make,
  ...) is a run; its exit code is N when the result starts ``Exit code N``, 0 when the result is not an
  error, and **not captured** (null) when the result is an error without a code (timeout, interruption)
  or missing (the session ended first);
* ``Edit``, ``MultiEdit`` and ``Write`` results that are not errors are artifacts: the path with the
  SHA-256 of the replaced and the new text (of the edit, not the whole file: the transcript has no more);
* a ``git commit`` whose result starts ``[branch abc1234]`` is a commit (repository: the session's cwd);
* the session claims ``done`` when its last assistant message ends its turn with text, else ``unknown``.

Lines that are not JSON objects are skipped and counted; every list is bounded by the kind's limits.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from typing import Any, Final, Protocol

import msgspec

from trustscore.kinds.work_records import (
    MAX_ARTIFACTS,
    MAX_COMMAND,
    MAX_COMMITS,
    MAX_PATH,
    MAX_RUNS,
    Artifact,
    Claim,
    Commit,
    Run,
    RunKind,
    WorkRecord,
)
from trustscore.ladder.rule import Rung, rung_of

MAX_TRANSCRIPT_BYTES: Final = 64 * 1024 * 1024
MAX_LINE_BYTES: Final = 4 * 1024 * 1024
_PLACEHOLDER: Final = "ts1_" + "0" * 40
_TEST = re.compile(
    r"\b(pytest|py\.test|tox|nox|jest|vitest|mocha|rspec|phpunit|ctest|"
    r"cargo\s+(test|nextest)|go\s+test|(npm|pnpm|yarn|bun)\s+(run\s+)?test|mvn\s+(test|verify)|"
    r"gradle\w*\s+test|python3?\s+-m\s+(pytest|unittest)|make\s+(test|check))\b"
)
_BUILD = re.compile(
    r"\b(cargo\s+(build|check)|go\s+build|(npm|pnpm|yarn|bun)\s+(run\s+)?build|tsc|make|cmake\s+--build|"
    r"mvn\s+(package|compile)|gradle\w*\s+build|mypy|ruff\s+check)\b"
)
_EXIT = re.compile(r"^Exit code (-?\d{1,10})\b")
_COMMIT = re.compile(r"^\[[^\]\s]+(?: \(root-commit\))? ([0-9a-f]{7,40})\]")


class Session(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One transcript's work-record draft, as kept in the local index."""

    adapter: str
    source: str  # the transcript's path
    session_id: str
    task_ref: str
    model: str | None
    claimed_outcome: Claim
    finished_at: str
    artifacts: list[Artifact]
    runs: list[Run]
    commits: list[Commit]
    skipped_lines: int = 0

    def record(self, agent: str = _PLACEHOLDER) -> WorkRecord:
        """The work record this session would be, self-attested by ``agent``."""
        return WorkRecord(
            nonce="0" * 32,
            issued_at=self.finished_at,
            reporter=agent,
            agent=agent,
            attestation="self",
            task_ref=self.task_ref,
            claimed_outcome=self.claimed_outcome,
            model=self.model,
            adapter=self.adapter,
            finished_at=self.finished_at,
            artifacts=self.artifacts,
            runs=self.runs,
            commits=self.commits,
        )

    def rung(self, rule: str) -> Rung:
        return rung_of(self.record(), rule)


class Adapter(Protocol):
    """A harness format: its name, whether a file looks like one of its transcripts, and the parser."""

    name: str

    def matches(self, filename: str) -> bool: ...

    def parse(self, source: str, data: bytes) -> list[Session]: ...


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _time(text: object) -> str | None:
    """A transcript timestamp as the RFC 3339 UTC form statements use (``...Z``), else None."""
    if not isinstance(text, str) or not re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,6})?Z", text):
        return None
    return text


def _result_text(block: dict[str, Any]) -> str:
    content = block.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(c.get("text", "")) for c in content if isinstance(c, dict))
    return ""


def _lines(data: bytes) -> Iterator[dict[str, Any] | None]:
    for line in data.splitlines():
        if not line.strip():
            continue
        if len(line) > MAX_LINE_BYTES:
            yield None
            continue
        try:
            obj = msgspec.json.decode(line)
        except (msgspec.DecodeError, RecursionError):
            yield None
            continue
        yield obj if isinstance(obj, dict) else None


def _clip(text: str, limit: int) -> str:
    text = "".join(ch if ch.isprintable() else " " for ch in text).strip()
    return text[:limit] or "?"


class ClaudeCode:
    """Claude Code's JSONL session logs (``~/.claude/projects/<project>/<session>.jsonl``)."""

    name = "claude_code"

    def matches(self, filename: str) -> bool:
        return filename.endswith(".jsonl")

    def parse(self, source: str, data: bytes) -> list[Session]:
        uses: dict[str, dict[str, Any]] = {}  # tool_use id -> the tool_use block
        results: dict[str, dict[str, Any]] = {}  # tool_use id -> the tool_result block
        order: list[str] = []
        session_id = model = cwd = last_time = None
        skipped = 0
        claimed: Claim = "unknown"
        for obj in _lines(data):
            if obj is None:
                skipped += 1
                continue
            session_id = session_id or (
                obj.get("sessionId") if isinstance(obj.get("sessionId"), str) else None
            )
            cwd = cwd or (obj.get("cwd") if isinstance(obj.get("cwd"), str) else None)
            last_time = _time(obj.get("timestamp")) or last_time
            message = obj.get("message")
            if not isinstance(message, dict):
                continue
            content = message.get("content")
            blocks = [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
            if obj.get("type") == "assistant":
                if isinstance(message.get("model"), str):
                    model = message["model"]
                has_text = any(b.get("type") == "text" for b in blocks)
                claimed = "done" if has_text and message.get("stop_reason") == "end_turn" else "unknown"
                for b in blocks:
                    if b.get("type") == "tool_use" and isinstance(b.get("id"), str):
                        uses[b["id"]] = b
                        order.append(b["id"])
            elif obj.get("type") == "user":
                for b in blocks:
                    if b.get("type") == "tool_result" and isinstance(b.get("tool_use_id"), str):
                        results[b["tool_use_id"]] = b
        if session_id is None or last_time is None:
            return []
        artifacts: list[Artifact] = []
        runs: list[Run] = []
        commits: list[Commit] = []
        for use_id in order:
            use, result = uses[use_id], results.get(use_id)
            name, args = use.get("name"), use.get("input")
            if not isinstance(args, dict):
                continue
            error = result is None or bool(result.get("is_error"))
            text = "" if result is None else _result_text(result)
            if name == "Bash" and isinstance(args.get("command"), str):
                command = args["command"]
                if "git commit" in command and not error and (m := _COMMIT.match(text)):
                    commits.append(Commit(repository=_clip(cwd or source, 500), commit=m.group(1)))
                kind: RunKind | None = (
                    "test" if _TEST.search(command) else "build" if _BUILD.search(command) else None
                )
                if kind is not None:
                    code = _EXIT.match(text)
                    exit_code = int(code.group(1)) if code else (None if error else 0)
                    out = None if result is None else _sha(text)
                    runs.append(
                        Run(
                            kind=kind,
                            command=_clip(command, MAX_COMMAND),
                            exit_code=exit_code,
                            output_sha256=out,
                        )
                    )
            elif (
                name in ("Edit", "MultiEdit", "Write")
                and isinstance(args.get("file_path"), str)
                and not error
            ):
                path = _clip(args["file_path"], MAX_PATH)
                if name == "Write":
                    artifacts.append(Artifact(path=path, sha256_after=_sha(str(args.get("content", "")))))
                else:
                    edits = args.get("edits") if name == "MultiEdit" else [args]
                    for e in edits if isinstance(edits, list) else []:
                        if isinstance(e, dict):
                            old, new = str(e.get("old_string", "")), str(e.get("new_string", ""))
                            artifacts.append(
                                Artifact(path=path, sha256_before=_sha(old), sha256_after=_sha(new))
                            )
        return [
            Session(
                adapter=self.name,
                source=source,
                session_id=_clip(session_id, 200),
                task_ref=_clip(f"{self.name}:{session_id}", 500),
                model=None if model is None else _clip(model, 200),
                claimed_outcome=claimed,
                finished_at=last_time,
                artifacts=artifacts[-MAX_ARTIFACTS:],
                runs=runs[-MAX_RUNS:],
                commits=commits[-MAX_COMMITS:],
                skipped_lines=skipped,
            )
        ]


ADAPTERS: Final[dict[str, Adapter]] = {"claude_code": ClaudeCode()}
