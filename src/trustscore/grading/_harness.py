"""Child side of the code sandbox, run by :mod:`sandbox` as ``python -S -s -B -E _harness.py MODE``.

``zygote FD PPID``: a warm, trusted process that imports everything once, drops root, and for each job
(two pipe descriptors received on the socket FD) forks a launcher. The launcher reads the request,
enters new user, mount, PID, network, IPC, UTS and cgroup namespaces, builds a new root (a read-only
tmpfs with a size-limited writable ``/work`` and ``/dev/null``, ``/dev/zero``, and ``/dev/urandom`` and
``/dev/random`` bound to ``/dev/zero``), and forks PID 1 of the new PID namespace, which sets rlimits,
drops every capability, installs a seccomp filter, fixes the clock and randomness, and runs the
candidate. The launcher enforces the wall clock (killing PID 1 kills the whole namespace) and appends
one ``#status`` line after PID 1 and every process of its namespace are gone.

``weak``: the old, interpreter-level sandbox (audit hook, rlimits, best-effort network namespace),
used only when the operator allows weak isolation on a kernel without user namespaces.

Requests are ``{"code", "function", "calls", "limits"}``; results are one JSON line. The expected
values never enter these processes. Standard library only. See docs/graders.md, "Sandbox".
"""

import builtins
import contextlib
import gc
import importlib
import io
import itertools
import json
import os
import resource
import select
import signal
import socket
import sys
import time
from typing import Any

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _HERE)
import _isolate  # type: ignore[import-not-found]  # noqa: E402 - the sibling, found through the line above

# Neither this directory (whose modules are named like the standard library's: code, schema, ...) nor
# the one Python put first for the script stays on the path of the modules the candidate may import.
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]

SANDBOX_ID = 65534  # uid and gid inside the user namespace; the host ids are the server's (nobody if root)
NOBODY = 65534
MAX_RESULT = 100_000
# The new root's device nodes: randomness reads zeros (see _fix_sources).
DEVICES = {"null": "/dev/null", "zero": "/dev/zero", "urandom": "/dev/zero", "random": "/dev/zero"}
MAX_REQUEST = 8 * 1024 * 1024
MAX_OUTPUT = 4 * 1024 * 1024  # bytes relayed back from one run
FIXED_EPOCH_NS = 1_767_225_600 * 10**9  # 2026-01-01T00:00:00Z: the clock every candidate sees
CLOCK_STEP_NS = 1_000_000  # each clock reading advances 1 ms, so elapsed times are positive and fixed
# Modules a candidate may import: loaded up front, so the set is the same on every machine.
ALLOWED_MODULES = (
    "array", "bisect", "cmath", "collections", "collections.abc", "copy", "dataclasses", "datetime",
    "decimal", "enum", "fractions", "functools", "heapq", "itertools", "json", "math", "numbers",
    "operator", "random", "re", "statistics", "string", "textwrap", "typing", "unicodedata",
)  # fmt: skip
# Loaded for the harness itself; removed from sys.modules before the candidate runs (re-importing
# them is an import the audit hook refuses).
PURGED = ("socket", "_socket", "select", "selectors", "resource", "ctypes", "_ctypes", "ctypes._endian",
          "_isolate", "subprocess", "_posixsubprocess")  # fmt: skip


def _preload() -> None:
    sys.modules["_datetime"] = None  # type: ignore[assignment]  # the pure datetime reads the fixed clock
    for name in ALLOWED_MODULES:
        importlib.import_module(name)


def _limit(limits: dict[str, int]) -> None:
    mem = limits["memory_mb"] * 1024 * 1024
    for res, soft, hard in (
        (resource.RLIMIT_CPU, limits["cpu_s"], limits["cpu_s"] + 1),
        (resource.RLIMIT_AS, mem, mem),
        (resource.RLIMIT_FSIZE, limits["fsize_kb"] * 1024, limits["fsize_kb"] * 1024),
        (resource.RLIMIT_NOFILE, limits["nofile"], limits["nofile"]),
        (resource.RLIMIT_NPROC, limits["nproc"], limits["nproc"]),
        (resource.RLIMIT_CORE, 0, 0),
    ):
        resource.setrlimit(res, (soft, hard))


def _fix_sources() -> None:
    """Give every run the same clock and randomness (the kernel side: /dev/urandom is /dev/zero and
    getrandom(2) is refused, so CPython's own fallback reads zeros; the PID namespace fixes PIDs)."""
    import random
    import time

    now = [FIXED_EPOCH_NS]
    sleep = time.sleep

    def time_ns() -> int:
        now[0] += CLOCK_STEP_NS
        return now[0]

    def seconds(*_: Any) -> float:
        return time_ns() / 1e9

    def nanos(*_: Any) -> int:
        return time_ns()

    def at(fn: Any) -> Any:
        return lambda secs=None: fn(seconds() if secs is None else secs)

    def fixed_sleep(secs: float) -> None:
        sleep(secs)
        now[0] += int(secs * 1e9)

    localtime, gmtime, ctime, asctime, strftime = (
        time.localtime, time.gmtime, time.ctime, time.asctime, time.strftime,
    )  # fmt: skip
    for name in ("time", "monotonic", "perf_counter", "process_time", "thread_time", "clock_gettime"):
        setattr(time, name, seconds)
        setattr(time, name + "_ns", nanos)
    time.time_ns = time_ns
    time.localtime, time.gmtime, time.ctime = at(localtime), at(gmtime), at(ctime)
    time.asctime = lambda t=None: asctime(localtime(seconds()) if t is None else t)
    time.strftime = lambda f, t=None: strftime(f, localtime(seconds()) if t is None else t)
    setattr(time, "sleep", fixed_sleep)  # noqa: B010 - its signature is narrower than the stub's
    os.times = lambda: os.times_result((0.0, 0.0, 0.0, 0.0, 0.0))
    zeros = bytes  # what the kernel sandbox's /dev/urandom gives; the weak sandbox has a real one
    setattr(os, "urandom", zeros)  # noqa: B010
    setattr(random, "_urandom", zeros)  # noqa: B010 - SystemRandom's own reference
    random.seed(0)


def _under(path: str, roots: list[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def _install_hook(workdir: str) -> None:
    """Defence in depth only: the kernel (namespaces, seccomp) is the boundary in the strong sandbox."""
    denied_prefixes = (
        "socket.",
        "ctypes.",
        "subprocess.",
        "os.exec",
        "os.spawn",
        "os.posix_spawn",
        "resource.",
    )
    denied = {"os.fork", "os.forkpty", "os.system", "os.kill", "os.killpg", "os.chdir", "pty.spawn",
              "sys.addaudithook", "os.startfile", "webbrowser.open", "shutil.rmtree"}  # fmt: skip
    path_events = {"open", "os.listdir", "os.scandir", "os.remove", "os.rename", "os.rmdir", "os.mkdir",
                   "os.symlink", "os.link", "os.chmod", "os.chown", "os.truncate", "os.utime", "glob.glob"}  # fmt: skip
    realpath = os.path.realpath
    busy = [False]

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if busy[0]:
            return
        if event == "import":
            raise ImportError(f"sandbox: module {args[0]!r} is not available")
        if event in denied or event.startswith(denied_prefixes):
            raise PermissionError(f"sandbox: {event} is not allowed")
        if event in path_events:
            target = args[0] if args else None
            if isinstance(target, int) or target is None:
                return
            busy[0] = True
            try:
                path = realpath(os.fsdecode(target))
            finally:
                busy[0] = False
            if not _under(path, [workdir]):
                raise PermissionError(f"sandbox: access to {path} is not allowed")

    sys.addaudithook(hook)


def _encode(value: Any) -> dict[str, Any]:
    try:
        text = json.dumps(value, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        return {"ok": False, "error": f"result is not JSON: {type(exc).__name__}"}
    if len(text) > MAX_RESULT:
        return {"ok": False, "error": "result too large"}
    return {"ok": True, "json": text}


def _run_candidate(request: dict[str, Any], out_fd: int, isolation: dict[str, bool], workdir: str) -> None:
    """Run the candidate in this process and write one JSON line of results to ``out_fd``; never returns."""
    out = os.fdopen(out_fd, "w")
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    os.close(devnull)
    try:
        _fix_sources()
        sys.stdout = sys.stderr = io.StringIO()
        for name in PURGED:
            sys.modules.pop(name, None)
        _install_hook(workdir)
    except Exception as exc:
        out.write(
            "\n" + json.dumps({"status": "setup-error", "error": f"{type(exc).__name__}: {exc}"}) + "\n"
        )
        out.flush()
        os._exit(0)
    results: list[dict[str, Any]] = []
    report: dict[str, Any] = {"status": "ok", "isolation": isolation, "results": results}
    namespace: dict[str, Any] = {"__name__": "__candidate__", "__builtins__": builtins}
    try:
        exec(compile(request["code"], "<candidate>", "exec"), namespace)  # noqa: S102
        fn = namespace.get(request["function"])
        if not callable(fn):
            raise NameError(f"function {request['function']!r} is not defined")
    except BaseException as exc:
        report["status"] = "load-error"
        report["error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
        fn = None
    if fn is not None:
        for args in request["calls"]:
            try:
                result = _encode(fn(*args))
            except BaseException as exc:
                result = {"ok": False, "error": f"{type(exc).__name__}: {str(exc)[:200]}"}
            sys.stdout.truncate(0)
            results.append(result)
    out.write("\n" + json.dumps(report) + "\n")
    out.flush()
    os._exit(0)


# --- strong sandbox: zygote, launcher, PID 1 -------------------------------------------------------


def _write_status(fd: int, status: dict[str, Any]) -> None:
    data = ("\n#status " + json.dumps(status) + "\n").encode()
    while data:
        data = data[os.write(fd, data) :]


def _read_all(fd: int, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while chunk := os.read(fd, 65536):
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            raise ValueError("request too large")
    return b"".join(chunks)


def _build_root(disk_kb: int) -> None:
    """A new root: read-only tmpfs, writable size-limited /work, four device nodes; the host is detached."""
    base = "/tmp"  # noqa: S108 - any existing directory serves as the mount point, in our own mount namespace
    _isolate.mount(None, "/", None, _isolate.MS_REC | _isolate.MS_PRIVATE)
    _isolate.mount(
        "tmpfs", base, "tmpfs", _isolate.MS_NOSUID | _isolate.MS_NODEV, "size=64k,nr_inodes=32,mode=0755"
    )
    for d in ("work", "dev", "old"):
        os.mkdir(f"{base}/{d}", 0o755)
    _isolate.mount("tmpfs", f"{base}/work", "tmpfs", _isolate.MS_NOSUID | _isolate.MS_NODEV | _isolate.MS_NOEXEC,
                   f"size={disk_kb}k,nr_inodes=1024,mode=0700")  # fmt: skip
    for name, source in DEVICES.items():
        target = f"{base}/dev/{name}"
        os.close(os.open(target, os.O_CREAT | os.O_WRONLY, 0o666))
        _isolate.mount(source, target, None, _isolate.MS_BIND)
    _isolate.pivot_root(base, f"{base}/old")
    os.chdir("/")
    _isolate.umount("/old")
    os.rmdir("/old")
    _isolate.mount(None, "/", None, _isolate.MS_REMOUNT | _isolate.MS_BIND | _isolate.MS_RDONLY
                   | _isolate.MS_NOSUID | _isolate.MS_NODEV)  # fmt: skip
    os.chdir("/work")


ISOLATION = ("user_namespace", "pid_namespace", "mount_namespace", "network_namespace", "ipc_namespace",
             "new_root", "no_capabilities", "seccomp", "rlimits")  # fmt: skip
DEFAULT_DISK_KB = 16 * 1024


def _gaps(keep: list[int]) -> list[tuple[int, int]]:
    """The descriptor ranges between and after the sorted ``keep`` (for ``os.closerange``)."""
    return [(a + 1, b) for a, b in itertools.pairwise(keep)] + [(keep[-1] + 1, 1 << 20)]


def _pid1(req_r: int, res_w: int, lifeline: int) -> None:
    """PID 1 of the new namespaces: confine itself for good, then wait for a request and run it."""
    for low, high in ((3, min(req_r, res_w, lifeline)), *_gaps(sorted((req_r, res_w, lifeline)))):
        os.closerange(low, high)  # the launcher's control socket and whatever else the zygote held
    _isolate.drop_capabilities()
    _isolate.prctl(_isolate.PR_SET_PDEATHSIG, signal.SIGKILL)  # after the last credential change
    if select.select([lifeline], [], [], 0)[0]:  # the launcher died before we could notice
        os._exit(0)
    os.close(lifeline)
    try:  # defence in depth: the new root holds nothing else anyway
        landlock = _isolate.install_landlock(["/work"], [f"/dev/{n}" for n in DEVICES], ["/"]) > 0
    except OSError:
        landlock = False
    _isolate.install_seccomp()
    request = json.loads(_read_all(req_r, MAX_REQUEST))  # blocks until a job comes
    os.close(req_r)
    _limit(request["limits"])
    # The candidate runs as PID 2: PID 1 of a namespace ignores signals it has no handler for, which
    # would turn the CPU limit's SIGXCPU into a later SIGKILL. PID 1 only waits and reports.
    child = os.fork()
    if child == 0:
        _isolate.prctl(_isolate.PR_SET_PDEATHSIG, signal.SIGKILL)
        _isolate.install_seccomp(candidate=True)  # one process, one thread, no timer: see _isolate
        _run_candidate(request, res_w, {**dict.fromkeys(ISOLATION, True), "landlock": landlock}, "/work")
    os.close(res_w)
    _, status = os.waitpid(child, 0)
    os._exit(128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status))


def _prepare() -> tuple[int, int, int, int]:
    """Namespaces, new root and a confined PID 1 waiting for its request: (pid, pidfd, req_w, res_r)."""
    uid, gid = os.geteuid(), os.getegid()
    _isolate.prctl(_isolate.PR_SET_DUMPABLE, 1)  # a uid change cleared it; /proc/self/*_map need it
    _isolate.unshare(_isolate.NAMESPACE_FLAGS)
    _isolate.write_id_maps(SANDBOX_ID, uid, gid)
    _build_root(DEFAULT_DISK_KB)
    _isolate.sethostname("sandbox")
    if not _isolate.seccomp_available():
        raise OSError(38, "no seccomp filter for this architecture")
    req_r, req_w = os.pipe()
    res_r, res_w = os.pipe()
    lifeline, keep = os.pipe()
    pid = os.fork()
    if pid == 0:
        for fd in (req_w, res_r, keep):
            os.close(fd)
        try:
            _pid1(req_r, res_w, lifeline)
        finally:
            os._exit(70)
    for fd in (req_r, res_w, lifeline):
        os.close(fd)
    return pid, os.pidfd_open(pid), req_w, res_r


def _launch(ctl: socket.socket, zygote: int) -> None:
    """A warm sandbox: prepared before its job arrives on ``ctl``; then relays, enforces the wall clock
    (killing PID 1 kills the whole namespace) and appends the status line. Runs in a fork of the zygote."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    _isolate.prctl(_isolate.PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != zygote:
        os._exit(0)
    try:
        prepared: tuple[int, int, int, int] | None = _prepare()
        failure = ""
    except OSError as exc:
        prepared, failure = None, str(exc)
    try:
        msg, fds, _, _ = socket.recv_fds(ctl, 16, 2)
    except OSError:
        os._exit(0)
    if not msg or len(fds) != 2:
        os._exit(0)  # the zygote went away: PID 1 dies with us
    req_fd, out_fd = fds
    if prepared is None:
        _write_status(out_fd, {"unavailable": failure})
        os._exit(0)
    pid, pidfd, req_w, res_r = prepared
    try:
        raw = _read_all(req_fd, MAX_REQUEST)
        limits = json.loads(raw)["limits"]
        wall, disk_kb = float(limits["wall_s"]), int(limits["disk_kb"])
    except (ValueError, KeyError, TypeError) as exc:
        _write_status(out_fd, {"unavailable": f"bad request: {exc}"})
        os._exit(0)
    if disk_kb != DEFAULT_DISK_KB:
        _isolate.mount(None, "/work", None, _isolate.MS_REMOUNT | _isolate.MS_NOSUID | _isolate.MS_NODEV
                       | _isolate.MS_NOEXEC, f"size={disk_kb}k,nr_inodes=1024")  # fmt: skip
    deadline = time.monotonic() + wall
    _relay(raw, req_w, res_r, out_fd, pidfd, deadline)
    if select.select([pidfd], [], [], max(0.0, deadline - time.monotonic()))[0]:
        _, status, usage = os.wait4(pid, 0)
        _drain(res_r, out_fd)
        code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)
        cpu = round(usage.ru_utime + usage.ru_stime, 3)
        _write_status(
            out_fd, {"signal": code - 128, "cpu": cpu} if code > 128 else {"exit": code, "cpu": cpu}
        )
    else:
        os.kill(pid, signal.SIGKILL)  # PID 1 gone: the kernel kills every process of the namespace
        os.waitpid(pid, 0)
        _write_status(out_fd, {"timeout": wall})
    os._exit(0)


def _relay(raw: bytes, req_w: int, res_r: int, out_fd: int, pidfd: int, deadline: float) -> None:
    """Feed the request to PID 1 and pass its output on (at most MAX_OUTPUT bytes) until it exits."""
    pending = memoryview(raw)
    os.set_blocking(req_w, False)
    sent = 0
    readers = [res_r, pidfd]
    while time.monotonic() < deadline:
        writers = [req_w] if req_w >= 0 else []
        ready_r, ready_w, _ = select.select(readers, writers, [], max(0.0, deadline - time.monotonic()))
        if ready_w:
            try:
                pending = pending[os.write(req_w, pending) :]
            except BrokenPipeError:
                pending = pending[:0]
            if not pending:
                os.close(req_w)
                req_w = -1
        if res_r in ready_r:
            chunk = os.read(res_r, 65536)
            if not chunk:  # every write end closed (the candidate may close its own early): wait for PID 1
                readers = [pidfd]  # alone, or select would wake at once for ever, a core busy until the end
            elif sent < MAX_OUTPUT:
                os.write(out_fd, chunk)
                sent += len(chunk)
        if pidfd in ready_r:
            break
    if req_w >= 0:
        os.close(req_w)


def _drain(res_r: int, out_fd: int) -> None:
    os.set_blocking(res_r, False)
    with contextlib.suppress(BlockingIOError):
        while chunk := os.read(res_r, 65536):
            os.write(out_fd, chunk)


def _drop_root() -> bool:
    if os.geteuid() != 0:
        return False
    os.setgroups([])
    os.setresgid(NOBODY, NOBODY, NOBODY)
    os.setresuid(NOBODY, NOBODY, NOBODY)
    return True


def zygote(sock_fd: int, parent: int) -> None:
    _preload()  # before dropping root: the standard library may not be readable by nobody
    gc.freeze()  # forks then copy fewer pages: collections leave the preloaded objects alone
    _drop_root()
    _isolate.prctl(_isolate.PR_SET_PDEATHSIG, signal.SIGKILL)  # set after the uid change, which clears it
    if os.getppid() != parent:
        os._exit(0)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # launchers are reaped by the kernel
    sock = socket.socket(fileno=sock_fd)
    me = os.getpid()
    warm = _fork_launcher(sock, me)
    sock.send(b"ready")
    while True:
        try:
            msg, fds, _, _ = socket.recv_fds(sock, 16, 2)
        except OSError:
            os._exit(0)
        if not msg:
            os._exit(0)  # the server went away
        if len(fds) == 2:
            try:
                socket.send_fds(warm, [b"run"], fds)
            except OSError:  # that launcher died: a fresh one takes the job
                warm.close()
                warm = _fork_launcher(sock, me)
                socket.send_fds(warm, [b"run"], fds)
            warm.close()
        for fd in fds:  # before the next fork, which must not inherit this job's pipes
            os.close(fd)
        if warm.fileno() < 0:
            warm = _fork_launcher(sock, me)  # the next sandbox gets ready while this one runs


def _fork_launcher(sock: socket.socket, zygote: int) -> socket.socket:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    if os.fork() == 0:
        sock.close()
        ours.close()
        try:
            _launch(theirs, zygote)
        finally:
            os._exit(0)
    theirs.close()
    return ours


# --- weak sandbox: the interpreter-level one, only when the operator allows it ------------------------


def weak() -> None:
    request = json.loads(sys.stdin.read())
    out_fd = os.dup(1)
    os.close(0)
    workdir = os.path.realpath(os.getcwd())
    try:
        isolation: dict[str, bool] = {"network_namespace": _weak_network()}
        _preload()
        _limit(request["limits"])
        isolation["dropped_root"] = _drop_root()
    except Exception as exc:
        os.write(out_fd, ("\n" + json.dumps({"status": "setup-error", "error": str(exc)}) + "\n").encode())
        os._exit(0)
    _run_candidate(request, out_fd, isolation, workdir)


def _weak_network() -> bool:
    flags = _isolate.CLONE_NEWNET if os.geteuid() == 0 else _isolate.CLONE_NEWUSER | _isolate.CLONE_NEWNET
    try:
        _isolate.unshare(flags)
    except OSError:
        return False
    return True


def _fixed_layout() -> None:
    """``id()``, the default ``hash()`` and ``repr()`` of objects are addresses: without address space
    randomisation (and with the same argv, environment and history) they are the same in every zygote,
    so after a restart too. Re-executes the zygote once with randomisation off, when the kernel lets it."""
    if not _isolate.layout_fixed() and _isolate.fix_layout():
        os.execv(sys.executable, [sys.executable, "-S", "-s", "-B", *sys.argv])  # noqa: S606 - ourselves


if __name__ == "__main__":
    if sys.argv[1:2] == ["zygote"]:
        _fixed_layout()
        zygote(int(sys.argv[2]), int(sys.argv[3]))
    else:
        weak()
