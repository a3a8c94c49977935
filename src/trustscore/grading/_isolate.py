"""Kernel isolation for the code sandbox, via ctypes (Python 3.11 has no ``os.unshare``).

Used only by the sandbox's child processes (``_harness.py``), before any untrusted code runs. Standard
library only. Linux x86_64; every call raises ``OSError`` naming the mechanism that the kernel refused,
so the caller can report which isolation is missing instead of running with less. See docs/graders.md.
"""

import ctypes
import os
import platform
import struct

CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
CLONE_NEWTIME = 0x00000080
NAMESPACE_FLAGS = (
    CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET
)
NS_MASK = NAMESPACE_FLAGS | CLONE_NEWTIME

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MNT_DETACH = 2

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_SECCOMP = 22
PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
SECCOMP_MODE_FILTER = 2

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
_libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
_libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
_libc.unshare.argtypes = [ctypes.c_int]
_libc.sethostname.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
_libc.syscall.restype = ctypes.c_long

# Refused to the candidate process only (a second filter after PID 1 forked it): no second process or
# thread (so its memory is one address space under RLIMIT_AS, and no schedule decides its result) and
# no interval timer (a clock it could count against). A SIGXCPU handler is refused for the same reason.
CANDIDATE_DENIED = ("clone", "fork", "vfork", "alarm", "setitimer", "timer_create", "timerfd_create")
# x86_64 system call numbers. Other architectures: no seccomp filter (the sandbox reports it missing).
ARCH_X86_64 = 0xC000003E
SYS = {
    "clone": 56, "execve": 59, "ptrace": 101, "syslog": 103, "personality": 135, "pivot_root": 155,
    "chroot": 161, "acct": 163, "mount": 165, "umount2": 166, "swapon": 167, "swapoff": 168, "reboot": 169,
    "sethostname": 170, "setdomainname": 171, "iopl": 172, "ioperm": 173, "init_module": 175,
    "delete_module": 176, "quotactl": 179, "socket": 41, "socketpair": 53, "lookup_dcookie": 212,
    "kexec_load": 246, "add_key": 248, "request_key": 249, "keyctl": 250, "unshare": 272,
    "perf_event_open": 298, "name_to_handle_at": 303, "open_by_handle_at": 304, "setns": 308,
    "process_vm_readv": 310, "process_vm_writev": 311, "kcmp": 312, "finit_module": 313, "getrandom": 318,
    "bpf": 321, "execveat": 322, "userfaultfd": 323, "kexec_file_load": 320, "io_uring_setup": 425,
    "io_uring_enter": 426, "io_uring_register": 427, "open_tree": 428, "move_mount": 429, "fsopen": 430,
    "fsconfig": 431, "fsmount": 432, "fspick": 433, "clone3": 435, "pidfd_getfd": 438,
    "mount_setattr": 442, "fork": 57, "vfork": 58, "alarm": 37, "setitimer": 38, "timer_create": 222,
    "timerfd_create": 283, "rt_sigaction": 13,
    # System V and POSIX IPC objects: their memory belongs to the run's IPC namespace, not its process,
    # so RLIMIT_AS does not bound it (a fresh namespace allows ~500 MiB of message queues and unbounded
    # shared memory; found by review). Refusing the calls that make one leaves none to use.
    "shmget": 29, "semget": 64, "msgget": 68, "mq_open": 240,
}  # fmt: skip
# Refused with EPERM. getrandom and clone3 get ENOSYS so that CPython and glibc fall back to
# /dev/urandom (a fixed stream inside the sandbox) and to clone(2) (whose flags the filter checks).
DENIED = sorted(
    SYS[name]
    for name in SYS
    if name not in ("clone", "getrandom", "clone3", *CANDIDATE_DENIED, "rt_sigaction")
)
ENOSYS_CALLS = (SYS["getrandom"], SYS["clone3"])
SIGXCPU = 24
EPERM, ENOSYS = 1, 38


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def unshare(flags: int) -> None:
    _check(_libc.unshare(flags), "unshare")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    def enc(s: str | None) -> bytes | None:
        return None if s is None else s.encode()

    _check(_libc.mount(enc(source), target.encode(), enc(fstype), flags, enc(data)), f"mount {target}")


def umount(target: str) -> None:
    _check(_libc.umount2(target.encode(), MNT_DETACH), f"umount {target}")


def pivot_root(new: str, old: str) -> None:
    _check(int(_libc.syscall(SYS["pivot_root"], new.encode(), old.encode())), "pivot_root")


def prctl(option: int, arg: int = 0) -> None:
    _check(_libc.prctl(option, arg, 0, 0, 0), f"prctl({option})")


def sethostname(name: str) -> None:
    _check(_libc.sethostname(name.encode(), len(name)), "sethostname")


def write_id_maps(inner: int, outer_uid: int, outer_gid: int) -> None:
    """Map one id inside the new user namespace to the caller's own ids (all an unprivileged user may)."""
    for name, text in (
        ("setgroups", "deny"),
        ("uid_map", f"{inner} {outer_uid} 1"),
        ("gid_map", f"{inner} {outer_gid} 1"),
    ):
        with open(f"/proc/self/{name}", "w") as f:
            f.write(text)


def drop_capabilities() -> None:
    """Empty the bounding, ambient, effective, permitted and inheritable sets (no exec will restore them)."""
    for cap in range(64):
        if _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() == 22:  # EINVAL: past last
            break
    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    header = struct.pack("Ii", 0x20080522, 0)
    data = bytes(24)
    _check(_libc.capset(header, data), "capset")


def seccomp_available() -> bool:
    return platform.machine() == "x86_64"


def _filter() -> bytes:
    ld, jeq, jset, ret = 0x20, 0x15, 0x45, 0x06
    allow, errno_, kill = 0x7FFF0000, 0x00050000, 0x80000000
    prog: list[tuple[int, int, int, int]] = [
        (ld, 0, 0, 4),  # seccomp_data.arch
        (jeq, 1, 0, ARCH_X86_64),
        (ret, 0, 0, kill),
        (ld, 0, 0, 0),  # seccomp_data.nr
        (0x35, 0, 1, 0x40000000),  # jge: x32 ABI calls are refused outright
        (ret, 0, 0, errno_ | EPERM),
        (jeq, 0, 4, SYS["clone"]),
        (ld, 0, 0, 16),  # low half of clone's flags argument
        (jset, 0, 1, NS_MASK),
        (ret, 0, 0, errno_ | EPERM),
        (ret, 0, 0, allow),
    ]
    for nr in ENOSYS_CALLS:
        prog += [(jeq, 0, 1, nr), (ret, 0, 0, errno_ | ENOSYS)]
    for nr in DENIED:
        prog += [(jeq, 0, 1, nr), (ret, 0, 0, errno_ | EPERM)]
    prog.append((ret, 0, 0, allow))
    return b"".join(struct.pack("HBBI", *ins) for ins in prog)


def _candidate_filter() -> bytes:
    ld, jeq, ret = 0x20, 0x15, 0x06
    allow, errno_, kill = 0x7FFF0000, 0x00050000, 0x80000000
    prog: list[tuple[int, int, int, int]] = [
        (ld, 0, 0, 4),  # seccomp_data.arch
        (jeq, 1, 0, ARCH_X86_64),
        (ret, 0, 0, kill),
        (ld, 0, 0, 0),  # seccomp_data.nr
        (jeq, 0, 4, SYS["rt_sigaction"]),
        (ld, 0, 0, 16),  # low half of the signal number
        (jeq, 0, 1, SIGXCPU),
        (ret, 0, 0, errno_ | EPERM),
        (ret, 0, 0, allow),
    ]
    for name in CANDIDATE_DENIED:
        prog += [(jeq, 0, 1, SYS[name]), (ret, 0, 0, errno_ | EPERM)]
    prog.append((ret, 0, 0, allow))
    return b"".join(struct.pack("HBBI", *ins) for ins in prog)


def install_seccomp(*, candidate: bool = False) -> None:
    """Refuse namespace, mount, exec, socket, tracing, keyring, bpf and io_uring calls for good; with
    ``candidate``, add the candidate's own filter (no process, thread or timer; see CANDIDATE_DENIED)."""
    if not seccomp_available():
        raise OSError(ENOSYS, f"seccomp filter: no system call table for {platform.machine()}")
    code = _candidate_filter() if candidate else _filter()
    buf = ctypes.create_string_buffer(code, len(code))
    prog = _SockFprog(len(code) // 8, ctypes.cast(buf, ctypes.c_void_p))
    prctl(PR_SET_NO_NEW_PRIVS, 1)
    _check(_libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(prog), 0, 0), "seccomp")


ADDR_NO_RANDOMIZE = 0x0040000
_libc.personality.argtypes = [ctypes.c_ulong]


def layout_fixed() -> bool:
    """Whether address space layout randomisation is off for this process."""
    current = int(_libc.personality(0xFFFFFFFF))
    return current >= 0 and bool(current & ADDR_NO_RANDOMIZE)


def fix_layout() -> bool:
    """Turn randomisation off from the next exec on (the caller then re-executes itself); False if the
    kernel (or a container's filter) refuses, which leaves addresses random: a documented limit."""
    current = int(_libc.personality(0xFFFFFFFF))
    if current < 0 or int(_libc.personality(current | ADDR_NO_RANDOMIZE)) < 0:
        return False
    return layout_fixed()


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


# Landlock (defence in depth under the new root): access rights by ABI version.
LL_EXECUTE, LL_WRITE_FILE, LL_READ_FILE, LL_READ_DIR = 1, 2, 4, 8
LL_MAKE_CHAR, LL_MAKE_SOCK, LL_MAKE_FIFO, LL_MAKE_BLOCK = 64, 512, 1024, 2048
LL_TRUNCATE, LL_IOCTL_DEV = 1 << 14, 1 << 15
LL_RULE_PATH_BENEATH = 1
SYS_LANDLOCK = (444, 445, 446)  # create_ruleset, add_rule, restrict_self


def landlock_abi() -> int:
    abi = int(_libc.syscall(SYS_LANDLOCK[0], None, 0, 1))  # LANDLOCK_CREATE_RULESET_VERSION
    return max(abi, 0)


def install_landlock(rw_dirs: list[str], rw_files: list[str], list_dirs: list[str]) -> int:
    """Allow only these paths (rw beneath ``rw_dirs``, read/write ``rw_files``, listing ``list_dirs``);
    deny TCP and, from ABI 6, signals and abstract sockets outside the domain. Returns the ABI used."""
    abi = landlock_abi()
    if abi < 1:
        raise OSError(ENOSYS, "landlock: not available in this kernel")
    fs = (1 << 13) - 1 | (1 << 13 if abi >= 2 else 0) | (LL_TRUNCATE if abi >= 3 else 0)
    fs |= LL_IOCTL_DEV if abi >= 5 else 0
    attr = struct.pack("QQQ", fs, 3 if abi >= 4 else 0, 3 if abi >= 6 else 0)
    size = 8 if abi < 4 else 16 if abi < 6 else 24
    ruleset = int(_libc.syscall(SYS_LANDLOCK[0], attr, size, 0))
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset")
    files = LL_READ_FILE | LL_WRITE_FILE | (LL_TRUNCATE if abi >= 3 else 0)
    dirs = fs & ~(LL_EXECUTE | LL_MAKE_CHAR | LL_MAKE_SOCK | LL_MAKE_FIFO | LL_MAKE_BLOCK | LL_IOCTL_DEV)
    try:
        for paths, allowed in ((rw_dirs, dirs), (rw_files, files), (list_dirs, LL_READ_DIR)):
            for path in paths:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
                try:
                    rule = struct.pack("=Qi", allowed, fd)
                    _check(int(_libc.syscall(SYS_LANDLOCK[1], ruleset, LL_RULE_PATH_BENEATH, rule, 0)),
                           f"landlock rule {path}")  # fmt: skip
                finally:
                    os.close(fd)
        prctl(PR_SET_NO_NEW_PRIVS, 1)
        _check(int(_libc.syscall(SYS_LANDLOCK[2], ruleset, 0)), "landlock_restrict_self")
    finally:
        os.close(ruleset)
    return abi
