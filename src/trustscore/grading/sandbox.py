"""Run untrusted Python in a confined child process (see docs/graders.md, "Sandbox").

The child is a fresh interpreter (``-S -s -B``) with an empty environment (except ``PYTHONHASHSEED=0``,
for deterministic hashing), a throwaway working directory, its own session/process group, CPU,
address-space, file-size, open-file and process-count limits, a network namespace of its own where the
kernel allows, an unprivileged uid when started as root, and an audit hook refusing sockets, process
creation, ctypes and file access outside its directory (reads of the standard library allowed). A
wall-clock timeout kills the whole process group. The expected results stay in this process.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

HARNESS = Path(__file__).with_name("_harness.py")
NOBODY = 65534
Status = Literal["ok", "load-error", "timeout", "cpu-limit", "killed", "crashed"]


@dataclass(frozen=True)
class Limits:
    cpu_s: int = 2
    wall_s: float = 10.0
    memory_mb: int = 256
    fsize_kb: int = 1024
    nofile: int = 32
    nproc: int = 16

    def for_child(self) -> dict[str, int]:
        return {k: getattr(self, k) for k in ("cpu_s", "memory_mb", "fsize_kb", "nofile", "nproc")}


@dataclass(frozen=True)
class CallResult:
    ok: bool
    value: Any = None  # the JSON-decoded return value when ok
    error: str = ""


@dataclass(frozen=True)
class SandboxRun:
    status: Status
    results: list[CallResult] = field(default_factory=list)
    detail: str = ""
    isolation: dict[str, bool] = field(default_factory=dict)


def _workdir() -> str:
    path = tempfile.mkdtemp(prefix="trustscore-sandbox-")
    if os.geteuid() == 0:
        os.chown(path, NOBODY, NOBODY)
    os.chmod(path, 0o700)
    return path


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def run_python(code: str, function: str, calls: list[list[Any]], limits: Limits | None = None) -> SandboxRun:
    """Define ``code`` in a sandbox and call ``function(*args)`` for each entry of ``calls``."""
    limits = limits or Limits()
    request = json.dumps({"code": code, "function": function, "calls": calls, "limits": limits.for_child()})
    workdir = _workdir()
    try:
        proc = subprocess.Popen(  # noqa: S603 - fixed argv: our interpreter and harness
            [sys.executable, "-S", "-s", "-B", str(HARNESS)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={"PYTHONHASHSEED": "0"},
            cwd=workdir,
            start_new_session=True,
            close_fds=True,
        )
        try:
            out, _ = proc.communicate(request.encode(), timeout=limits.wall_s)
        except subprocess.TimeoutExpired:
            _kill_group(proc.pid)
            proc.communicate()
            return SandboxRun("timeout", detail=f"wall-clock limit of {limits.wall_s:g} s exceeded")
        finally:
            _kill_group(proc.pid)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return _interpret(proc.returncode, out, limits)


def _interpret(returncode: int, out: bytes, limits: Limits) -> SandboxRun:
    lines = out.decode("utf-8", "replace").strip().splitlines()
    report: dict[str, Any] | None = None
    if returncode == 0 and lines:
        try:
            parsed = json.loads(lines[-1])
            report = parsed if isinstance(parsed, dict) else None
        except json.JSONDecodeError:
            report = None
    if report is None:
        if returncode == -signal.SIGXCPU:
            return SandboxRun("cpu-limit", detail=f"CPU limit of {limits.cpu_s} s exceeded")
        if returncode == -signal.SIGKILL:
            return SandboxRun("killed", detail="killed (CPU or memory limit)")
        return SandboxRun("crashed", detail=f"sandbox exited with status {returncode} and no result")
    results = [
        CallResult(True, json.loads(r["json"]))
        if r.get("ok")
        else CallResult(False, error=str(r.get("error")))
        for r in report.get("results", [])
    ]
    status: Status = "load-error" if report.get("status") == "load-error" else "ok"
    return SandboxRun(status, results, str(report.get("error", "")), dict(report.get("isolation", {})))
