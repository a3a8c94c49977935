"""A stand-in grading server for the escape suite: runs one sandboxed job and reports what it left behind.

    python sandbox_runner.py < job.json        # job: {"code", "function", "calls", "limits", "as_nobody"}

Started as root. With ``as_nobody`` it first becomes uid/gid 65534 (after making the interpreter, which
lives under root's 0700 home here, reachable through a private mount namespace), so the sandbox is
started by an unprivileged user. It is a child subreaper, so a sandboxed process that escapes its
process group or session is re-parented here and shows up in ``leftover``. With ``hold`` it prints
``started`` and runs the job without reporting (the test kills it with SIGKILL mid-grading).
"""

from __future__ import annotations

import ctypes
import json
import os
import struct
import sys
import tempfile
import threading
import time
from pathlib import Path

PR_SET_CHILD_SUBREAPER = 36
libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        raise OSError(ctypes.get_errno(), what)


def become_nobody() -> None:
    """Private mount namespace in which root's home is traversable, then drop to 65534 for good."""
    real = Path(sys.base_prefix).resolve()
    _check(libc.unshare(0x00020000), "unshare(CLONE_NEWNS)")
    _check(libc.mount(None, b"/", None, (1 << 14) | (1 << 18), None), "make / private")
    if str(real).startswith("/root/"):
        hold = tempfile.mkdtemp(prefix="sandbox-runner-")
        _check(libc.mount(b"/root", hold.encode(), None, 4096 | (1 << 14), None), "hold /root")
        _check(libc.mount(b"tmpfs", b"/root", b"tmpfs", 0, b"mode=0755"), "tmpfs on /root")
        first = Path(real).relative_to("/root").parts[0]
        os.mkdir(f"/root/{first}")
        _check(
            libc.mount(f"{hold}/{first}".encode(), f"/root/{first}".encode(), None, 4096 | (1 << 14), None),
            "bind",
        )
        _check(libc.umount2(hold.encode(), 2), "unmount the holding point")  # MNT_DETACH
        os.rmdir(hold)
    os.setgroups([])
    os.setresgid(65534, 65534, 65534)
    os.setresuid(65534, 65534, 65534)


def deny_unshare() -> None:
    """Stand in for a kernel without user namespaces: unshare(2) fails with EPERM (x86_64 filter)."""
    ins = [(0x20, 0, 0, 4), (0x15, 1, 0, 0xC000003E), (0x06, 0, 0, 0x7FFF0000), (0x20, 0, 0, 0),
           (0x15, 0, 1, 272), (0x06, 0, 0, 0x00050001), (0x06, 0, 0, 0x7FFF0000)]  # fmt: skip
    code = b"".join(struct.pack("HBBI", *i) for i in ins)
    buf = ctypes.create_string_buffer(code, len(code))
    prog = struct.pack("HxxxxxxQ", len(ins), ctypes.addressof(buf))
    pbuf = ctypes.create_string_buffer(prog, len(prog))
    _check(libc.prctl(38, 1, 0, 0, 0), "no_new_privs")
    _check(libc.prctl(22, 2, ctypes.c_void_p(ctypes.addressof(pbuf)), 0, 0), "seccomp")


def descendants(root: int) -> list[tuple[int, str]]:
    parents: dict[int, int] = {}
    names: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[0] == "Z":
            continue
        parents[int(entry)] = int(fields[1])
        names[int(entry)] = stat[stat.index("(") + 1 : stat.rindex(")")]
    found: list[tuple[int, str]] = []
    frontier = [root]
    while frontier:
        pid = frontier.pop()
        kids = [p for p, pp in parents.items() if pp == pid]
        found += [(k, names[k]) for k in kids]
        frontier += kids
    return found


def leftover(zygote: int | None) -> list[tuple[int, str]]:
    """Our descendants, less the zygote and the one warm sandbox it keeps ready (a launcher and its
    PID 1, which has run nothing): anything else outlived the run."""
    left = [d for d in descendants(os.getpid()) if d[0] != zygote]
    if zygote is None:
        return left
    launchers = [pid for pid, _ in descendants(zygote) if _ppid(pid) == zygote]
    if len(launchers) == 1:
        under = descendants(launchers[0])  # (empty while the launcher is still preparing)
        if len(under) <= 1 and not any(descendants(pid) for pid, _ in under):
            warm = {launchers[0], *(pid for pid, _ in under)}
            left = [d for d in left if d[0] not in warm]
    return left


def _ppid(pid: int) -> int:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:  # gone meanwhile
        return -1
    return int(stat[stat.rindex(")") + 2 :].split()[1])


def main() -> None:
    job = json.loads(sys.stdin.read())
    if job.get("as_nobody"):
        become_nobody()
    _check(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), "subreaper")
    if job.get("deny_unshare"):
        deny_unshare()
    from trustscore.errors import SandboxUnavailable
    from trustscore.grading import sandbox

    sandbox.configure(allow_weak=bool(job.get("allow_weak")))

    limits = sandbox.Limits(**job.get("limits", {}))
    if job.get("hold"):
        thread = threading.Thread(
            target=sandbox.run_python, args=(job["code"], job["function"], job["calls"], limits), daemon=True
        )
        thread.start()
        print("started", flush=True)
        thread.join()
        return
    try:
        run = sandbox.run_python(job["code"], job["function"], job["calls"], limits)
    except SandboxUnavailable as exc:
        print(json.dumps({"uid": os.getuid(), "refused": exc.message, "mode": sandbox.isolation().mode}))
        return
    state = getattr(sandbox, "_state", None)  # (absent from the interpreter-level sandbox of before)
    fs = state.forkserver if state is not None else None
    deadline = time.monotonic() + 3
    left = leftover(fs.pid if fs is not None else None)
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = leftover(fs.pid if fs is not None else None)
    print(json.dumps({
        "uid": os.getuid(),
        "mode": sandbox.isolation().mode,
        "status": run.status,
        "detail": run.detail,
        "isolation": run.isolation,
        "results": [[r.ok, r.value, r.error] for r in run.results],
        "leftover": left,
    }))  # fmt: skip


if __name__ == "__main__":
    main()
