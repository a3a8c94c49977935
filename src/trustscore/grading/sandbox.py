"""Run untrusted Python in a kernel-isolated child (see docs/graders.md, "Sandbox").

Each run gets fresh user, PID, mount, network, IPC, UTS and cgroup namespaces, a new root holding only a
size-limited writable ``/work`` and four device nodes, no capabilities, a seccomp filter, rlimits, a
fixed clock and randomness, and a wall clock after which its PID namespace is killed whole. Processes
come from a warm *zygote* (``_harness.py zygote``) that has imported everything once and forks a fresh
sandbox per run; the zygote, each launcher and each PID 1 die with their parent (``PR_SET_PDEATHSIG``),
so killing the server, even with SIGKILL, kills every sandboxed process.

If the kernel refuses any of it, code is not run: :func:`run_python` raises :class:`SandboxUnavailable`
unless the operator opted into the weak, interpreter-level sandbox (``configure(allow_weak=True)``,
``TRUSTSCORE_SANDBOX_ALLOW_WEAK``). The expected results stay in this process.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import json
import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from trustscore.errors import SandboxUnavailable

HARNESS = Path(__file__).with_name("_harness.py")
NOBODY = 65534
MAX_OUTPUT = 4 * 1024 * 1024  # bytes of candidate output the launcher relays back from one run
MAX_ERROR = 300  # characters of an error kept from a run's report (the harness sends at most ~250)
Status = Literal["ok", "load-error", "timeout", "cpu-limit", "killed", "crashed"]
Mode = Literal["kernel", "weak", "refused"]
KERNEL_MECHANISMS = (
    "user, PID, mount, network, IPC, UTS and cgroup namespaces; new root (read-only tmpfs, 16 MiB /work); "
    "no capabilities; no_new_privs; seccomp filter; Landlock where the kernel has it; rlimits; PDEATHSIG; "
    "fixed clock and randomness"
)


@dataclass(frozen=True)
class Limits:
    cpu_s: int = 2
    wall_s: float = 10.0
    memory_mb: int = 256
    fsize_kb: int = 1024
    nofile: int = 32
    nproc: int = 16
    disk_kb: int = 16 * 1024  # total writable space of a run (tmpfs size)

    def for_child(self) -> dict[str, Any]:
        return {
            k: getattr(self, k)
            for k in ("cpu_s", "wall_s", "memory_mb", "fsize_kb", "nofile", "nproc", "disk_kb")
        }


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
    cpu_s: float = 0.0  # CPU time the run used (kernel sandbox), charged to the report's budget


class Budget:
    """Sandbox seconds one report may spend: a timeout charges its wall limit, other runs their CPU time.

    Honest answers use milliseconds, so only answers that hit limits exhaust it, and whether they do
    depends on how many hit limits, not on the machine's speed (a CPU-limit kill charges ~its limit).
    """

    def __init__(self, seconds: float) -> None:
        self.total = seconds
        self.left = seconds

    def charge(self, run: SandboxRun, limits: Limits) -> None:
        self.left -= limits.wall_s if run.status == "timeout" else run.cpu_s


_budget: contextvars.ContextVar[Budget | None] = contextvars.ContextVar("sandbox_budget", default=None)


@contextlib.contextmanager
def budget(seconds: float) -> Iterator[Budget]:
    """Charge every run in this context (and threads started from it) to one :class:`Budget`."""
    spent = Budget(seconds)
    token = _budget.set(spent)
    try:
        yield spent
    finally:
        _budget.reset(token)


@dataclass(frozen=True)
class Isolation:
    """Which sandbox is in force in this process: ``kernel``, ``weak`` (operator opt-in) or ``refused``."""

    mode: Mode
    mechanisms: str
    reason: str = ""  # why the kernel sandbox is not available, when it is not


@dataclass
class _State:
    allow_weak: bool = False
    pid: int = 0
    isolation: Isolation | None = None
    forkserver: _Forkserver | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)


_state = _State()


def configure(*, allow_weak: bool) -> None:
    """Set the process-wide policy (from ``Settings.sandbox_allow_weak`` at start-up); a change re-probes."""
    with _state.lock:
        if allow_weak != _state.allow_weak:
            _state.allow_weak = allow_weak
            _state.isolation = None


def isolation() -> Isolation:
    """Probe once per process (a real sandboxed run) and say which isolation grades code."""
    with _state.lock:
        if _state.isolation is None or _state.pid != os.getpid():
            _state.pid = os.getpid()
            _state.forkserver = _Forkserver()
            reason = _state.forkserver.probe()
            if not reason:
                _state.isolation = Isolation("kernel", KERNEL_MECHANISMS)
            elif _state.allow_weak:
                _state.isolation = Isolation(
                    "weak", "audit hook, rlimits, best-effort network namespace", reason
                )
            else:
                _state.isolation = Isolation("refused", "none: code items are not graded", reason)
        return _state.isolation


def run_python(code: str, function: str, calls: list[list[Any]], limits: Limits | None = None) -> SandboxRun:
    """Define ``code`` in a sandbox and call ``function(*args)`` for each entry of ``calls``."""
    limits = limits or Limits()
    request = json.dumps({"code": code, "function": function, "calls": calls, "limits": limits.for_child()})
    level = isolation()
    if level.mode == "refused":
        raise SandboxUnavailable(
            f"this machine cannot isolate code items, so they are not run: {level.reason}"
        )
    spent = _budget.get()
    if spent is not None and spent.left <= 0:
        return SandboxRun(
            "killed", detail=f"not run: the report's sandbox budget of {spent.total:g} s is spent"
        )
    if level.mode == "weak":
        started = time.monotonic()
        run = _run_weak(request.encode(), limits)
        run = dataclasses.replace(run, cpu_s=time.monotonic() - started)
    else:
        assert _state.forkserver is not None
        run = _state.forkserver.run(request.encode(), limits)
    if spent is not None:
        spent.charge(run, limits)
    return run


class _Forkserver:
    """The server side of the zygote: one SOCK_SEQPACKET socket; each run passes it two pipe ends."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self.pid = 0

    def _start(self) -> socket.socket:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        started = threading.Event()
        box: dict[str, Any] = {}

        def keep() -> None:  # the zygote's parent thread: its PDEATHSIG fires when this thread ends
            try:
                proc = subprocess.Popen(  # noqa: S603 - fixed argv: our interpreter and harness
                    [
                        sys.executable,
                        "-S",
                        "-s",
                        "-B",
                        str(HARNESS),
                        "zygote",
                        str(theirs.fileno()),
                        str(os.getpid()),
                    ],
                    pass_fds=[theirs.fileno()],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    env={"PYTHONHASHSEED": "0"},
                    cwd="/",
                    start_new_session=True,
                )
            except OSError as exc:
                box["error"] = exc
                started.set()
                return
            box["proc"] = proc
            started.set()
            proc.wait()

        threading.Thread(target=keep, name="sandbox-zygote", daemon=True).start()
        started.wait()
        theirs.close()
        if "error" in box:
            raise OSError(f"cannot start the sandbox zygote: {box['error']}")
        ours.settimeout(30)
        if ours.recv(16) != b"ready":
            raise OSError("the sandbox zygote did not start")
        ours.settimeout(None)
        self.pid = box["proc"].pid
        return ours

    def _send(self, req_r: int, resp_w: int) -> None:
        with self._lock:
            for attempt in (1, 2):
                if self._sock is None:
                    self._sock = self._start()
                try:
                    socket.send_fds(self._sock, [b"run"], [req_r, resp_w])
                    return
                except OSError:
                    self._sock.close()
                    self._sock = None
                    if attempt == 2:
                        raise

    def probe(self) -> str:
        """An empty string if a trivial run is fully isolated, else why not."""
        try:
            run = self.run(json.dumps({"code": "def f():\n    return 1\n", "function": "f", "calls": [[]],
                                       "limits": Limits().for_child()}).encode(), Limits())  # fmt: skip
        except (OSError, SandboxUnavailable) as exc:
            return str(exc)
        required = {k: v for k, v in run.isolation.items() if k != "landlock"}  # (defence in depth only)
        if run.status != "ok" or len(required) < 9 or not all(required.values()):
            return f"sandbox probe failed: {run.status} {run.detail}".strip()
        return ""

    def run(self, request: bytes, limits: Limits) -> SandboxRun:
        req_r, req_w = os.pipe()
        resp_r, resp_w = os.pipe()
        try:
            self._send(req_r, resp_w)
        finally:
            os.close(req_r)
            os.close(resp_w)
        out, complete = _exchange(req_w, resp_r, request, time.monotonic() + limits.wall_s + 10)
        if not complete:  # the launcher, not the candidate, failed: no grade, the submitter may retry
            raise SandboxUnavailable("the sandbox did not answer in time; retry later")
        return _interpret_status(out, limits)


def _exchange(req_w: int, resp_r: int, request: bytes, deadline: float) -> tuple[bytes, bool]:
    """Write the request, read the answer to EOF; False if the deadline passed first. The launcher relays
    at most MAX_OUTPUT bytes of the candidate's, so more than that (plus its status) is dropped here."""
    os.set_blocking(req_w, False)
    chunks: list[bytes] = []
    size = 0
    sel = selectors.DefaultSelector()
    sel.register(req_w, selectors.EVENT_WRITE)
    sel.register(resp_r, selectors.EVENT_READ)
    pending = memoryview(request)
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return b"", False
            for key, _ in sel.select(left):
                if key.fd == req_w:
                    try:
                        pending = pending[os.write(req_w, pending) :]
                    except BrokenPipeError:
                        pending = pending[:0]
                    if not pending:
                        sel.unregister(req_w)
                        os.close(req_w)
                        req_w = -1
                else:
                    chunk = os.read(resp_r, 65536)
                    if not chunk:
                        return b"".join(chunks), True
                    if size < 2 * MAX_OUTPUT:
                        chunks.append(chunk)
                        size += len(chunk)
    finally:
        sel.close()
        if req_w >= 0:
            os.close(req_w)
        os.close(resp_r)


def _interpret_status(out: bytes, limits: Limits) -> SandboxRun:
    text = out.decode("utf-8", "replace")
    head, sep, tail = text.rpartition("\n#status ")
    try:
        status = json.loads(tail.strip()) if sep else None
    except json.JSONDecodeError:
        status = None
    if not isinstance(status, dict):  # the launcher writes it last, whatever the candidate did
        raise SandboxUnavailable("the sandbox ended without a status (was its zygote killed?); retry later")
    if "unavailable" in status:
        raise SandboxUnavailable(str(status["unavailable"]))
    if "timeout" in status:
        return SandboxRun("timeout", detail=f"wall-clock limit of {limits.wall_s:g} s exceeded")
    code = -int(status["signal"]) if "signal" in status else int(status.get("exit", 1))
    return dataclasses.replace(_interpret(code, head.encode(), limits), cpu_s=float(status.get("cpu", 0.0)))


# --- the weak sandbox ----------------------------------------------------------------------------------


def _workdir() -> str:
    path = tempfile.mkdtemp(prefix="trustscore-sandbox-")
    if os.geteuid() == 0:
        os.chown(path, NOBODY, NOBODY)
    os.chmod(path, 0o700)
    return path


def _ended(pid: int) -> bool:
    """Whether the child ``pid`` has ended, leaving it to be reaped."""
    return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _run_weak(request: bytes, limits: Limits) -> SandboxRun:
    workdir = _workdir()
    try:
        proc = subprocess.Popen(  # noqa: S603 - fixed argv: our interpreter and harness
            [sys.executable, "-S", "-s", "-B", str(HARNESS), "weak"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={"PYTHONHASHSEED": "0"},
            cwd=workdir,
            start_new_session=True,
            close_fds=True,
        )
        timeout = SandboxRun("timeout", detail=f"wall-clock limit of {limits.wall_s:g} s exceeded")
        try:
            # Read as the kernel sandbox's answer is read: at most 2 x MAX_OUTPUT kept, whatever the
            # candidate writes (communicate() kept it all: 200 MiB written was 800 MiB of the server's).
            assert proc.stdin is not None
            assert proc.stdout is not None
            req_w, resp_r = os.dup(proc.stdin.fileno()), os.dup(proc.stdout.fileno())
            proc.stdin.close()
            proc.stdout.close()
            deadline = time.monotonic() + limits.wall_s
            out, complete = _exchange(req_w, resp_r, request, deadline)
            # Its end awaited without reaping it: while the leader is unreaped its group id cannot be
            # taken by another process, so the group killed below is its own (review).
            while complete and not _ended(proc.pid):
                if time.monotonic() >= deadline:  # it closed its output and went on
                    complete = False
                    break
                time.sleep(0.005)
            if not complete:
                return timeout
        finally:
            _kill_group(proc.pid)
            proc.wait()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return _interpret(proc.returncode, out, limits)


def _interpret(returncode: int, out: bytes, limits: Limits) -> SandboxRun:
    """The run the candidate's process reported. Its result line is written by the harness in that
    process, so the candidate can shape it (a value nested too deep to read back, or a line of its own on
    the result pipe): whatever it holds this never raises, and a malformed line is a crash (a failure
    grade), never an error that would leave the answer ungraded for the agent to replace."""
    lines = out.decode("utf-8", "replace").strip().splitlines()
    report: dict[str, Any] | None = None
    if returncode == 0 and lines:
        try:
            parsed = json.loads(lines[-1])
            report = parsed if isinstance(parsed, dict) else None
        except (ValueError, RecursionError):  # (JSONDecodeError is a ValueError)
            report = None
    if report is None or report.get("status") == "setup-error":
        if returncode == -signal.SIGXCPU:
            return SandboxRun("cpu-limit", detail=f"CPU limit of {limits.cpu_s} s exceeded")
        if returncode == -signal.SIGKILL:
            return SandboxRun("killed", detail="killed (CPU or memory limit)")
        return SandboxRun("crashed", detail=f"sandbox exited with status {returncode} and no result")
    run = _reported(report)
    return run if run is not None else SandboxRun("crashed", detail="the run's result line is malformed")


def _reported(report: dict[str, Any]) -> SandboxRun | None:
    """The run a result line describes, None if it is not in the harness's shape."""
    results, isolation, error = (
        report.get("results", []),
        report.get("isolation", {}),
        report.get("error", ""),
    )
    if not isinstance(results, list) or not isinstance(error, str) or not isinstance(isolation, dict):
        return None
    if not all(isinstance(v, bool) for v in isolation.values()):
        return None
    calls = []
    for r in results:
        if not isinstance(r, dict) or not isinstance(r.get("ok", False), bool):
            return None
        if r.get("ok"):
            text = r.get("json")
            if not isinstance(text, str):
                return None
            calls.append(_decoded(text))
        else:
            reason = r.get("error", "")
            if not isinstance(reason, str):
                return None
            calls.append(CallResult(False, error=reason[:MAX_ERROR]))
    status: Status = "load-error" if report.get("status") == "load-error" else "ok"
    return SandboxRun(status, calls, error[:MAX_ERROR], dict(isolation))


def _decoded(text: str) -> CallResult:
    """A call's JSON-encoded return value; one that cannot be read back (nested deeper than the parser
    goes, or an integer of more digits than it converts) fails its test: it cannot equal an expected value."""
    try:
        return CallResult(True, json.loads(text))
    except (ValueError, RecursionError):
        return CallResult(False, error="the result cannot be read (nested too deeply, or not JSON)")
