"""Child side of the code sandbox; run as ``python -S -s -B _harness.py`` by :mod:`sandbox`.

Reads ``{"code", "function", "calls", "limits"}`` as JSON on stdin, confines itself (network
namespace, resource limits, an unprivileged uid when started as root, an audit hook that refuses
sockets, process creation, ctypes and file access outside the working directory), runs the candidate
and writes one JSON line of results to the original stdout. The expected values never enter this
process, so the candidate cannot read them. Only the standard library is used.
"""

import builtins
import ctypes
import importlib
import io
import json
import os
import resource
import sys
from typing import Any

CLONE_NEWNET = 0x40000000
CLONE_NEWUSER = 0x10000000
NOBODY = 65534
MAX_RESULT = 100_000
# Modules a candidate may import: loaded before privileges drop, so the set is the same on every machine.
ALLOWED_MODULES = (
    "array", "bisect", "cmath", "collections", "collections.abc", "copy", "dataclasses", "datetime",
    "decimal", "enum", "fractions", "functools", "heapq", "itertools", "json", "math", "numbers",
    "operator", "random", "re", "statistics", "string", "textwrap", "typing", "unicodedata",
)  # fmt: skip


def _isolate_network() -> bool:
    libc = ctypes.CDLL(None, use_errno=True)
    flags = CLONE_NEWNET if os.geteuid() == 0 else CLONE_NEWUSER | CLONE_NEWNET
    return bool(libc.unshare(flags) == 0)


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


def _drop_root() -> bool:
    if os.geteuid() != 0:
        return False
    os.setgroups([])
    os.setgid(NOBODY)
    os.setuid(NOBODY)
    return True


def _under(path: str, roots: list[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def _install_hook(workdir: str) -> None:
    read_roots = [os.path.realpath(os.path.dirname(os.__file__))]
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
    path_events = {"os.listdir", "os.scandir", "os.remove", "os.rename", "os.rmdir", "os.mkdir", "os.symlink",
                   "os.link", "os.chmod", "os.chown", "os.truncate", "os.utime", "glob.glob"}  # fmt: skip
    read_events = {"open", "os.listdir", "os.scandir", "glob.glob"}
    realpath = os.path.realpath
    busy = [False]

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if busy[0]:
            return
        if event == "import":
            raise ImportError(f"sandbox: module {args[0]!r} is not available")
        if event in denied or event.startswith(denied_prefixes):
            raise PermissionError(f"sandbox: {event} is not allowed")
        if event == "open" or event in path_events:
            target = args[0] if args else None
            if isinstance(target, int) or target is None:
                return
            busy[0] = True
            try:
                path = realpath(os.fsdecode(target))
            finally:
                busy[0] = False
            if _under(path, [workdir]):
                return
            writing = event not in read_events
            if event == "open":
                mode = args[1] if len(args) > 1 else None
                flags = args[2] if len(args) > 2 and isinstance(args[2], int) else 0
                writing = (isinstance(mode, str) and bool(set(mode) & set("wax+"))) or bool(
                    flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC)
                )
            if not writing and _under(path, read_roots):
                return
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


def main() -> None:
    request = json.loads(sys.stdin.read())
    out = os.fdopen(os.dup(1), "w")
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    os.close(devnull)
    os.close(0)
    try:
        workdir = os.path.realpath(os.getcwd())
        isolation: dict[str, bool] = {"network_namespace": _isolate_network()}
        for name in ALLOWED_MODULES:
            importlib.import_module(name)
        _limit(request["limits"])
        isolation["dropped_root"] = _drop_root()
        sys.stdout = sys.stderr = io.StringIO()
        del sys.path[0]  # the harness's own directory
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


main()
