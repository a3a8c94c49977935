"""Which of numpy's SIMD code paths a process asks for: chosen before numpy is first imported.

numpy sorts 64-bit numbers with x86-simd-sort and, on a CPU with AVX-512, takes that library's AVX-512
path. Its partition step stores with ``vpcompressq`` to memory, which AMD Zen 4 (family 19h) runs in
microcode: on this project's Zen 4 VM (numpy 2.4.6) sorting 10^6 int64 takes 50 ms on that path and
9.8 ms on the AVX2 one, and a full recompute of 10^6 evidence rows spends most of its time in such
sorts (docs/operations.md, "numpy on AMD Zen 4"). OpenJDK turns its AVX-512 sort off on the same CPUs
(JDK-8317976); numpy has no switch but ``NPY_DISABLE_CPU_FEATURES``, read once when numpy is imported.

So the ``trustscore`` command, before it imports anything that imports numpy, names numpy's AVX-512
targets in that variable on a Zen 4 CPU, unless the operator has set it (to anything, even empty).
Results are the same to the bit either way: a sort puts the same numbers in the same order, and the
engine computes its powers portably (docs/methodology.md, "Arithmetic"). A numpy whose dispatch target
names this module does not know is left alone (a wrong name makes numpy warn and ignore the variable);
a test checks the names against the installed numpy.
"""

from __future__ import annotations

import importlib.metadata
import os
import sys
from collections.abc import MutableMapping
from pathlib import Path

#: numpy's environment variable listing dispatch targets it must not use.
VARIABLE = "NPY_DISABLE_CPU_FEATURES"

#: numpy (major, minor) → its AVX-512 dispatch targets on x86-64, as that release names them.
AVX512_TARGETS = {(2, 4): "X86_V4 AVX512_ICL AVX512_SPR"}

#: AMD's family 19h: Zen 3 (no AVX-512) and Zen 4. Zen 5 (1Ah) stores a compress to memory quickly.
ZEN4_FAMILY = 0x19


def avx512_targets_to_disable(cpuinfo: str, numpy_version: str) -> str | None:
    """What ``NPY_DISABLE_CPU_FEATURES`` should say for the CPU ``cpuinfo`` describes (Linux
    ``/proc/cpuinfo``, its first processor read) under numpy ``numpy_version``: its AVX-512 targets on an
    AMD family 19h CPU with AVX-512 if this module knows their names in that release, else None."""
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        if not line.strip():
            if fields:
                break  # the first processor's block is enough: every core of a machine is one model
            continue
        name, _, value = line.partition(":")
        fields.setdefault(name.strip(), value.strip())
    try:
        family = int(fields.get("cpu family", ""))
    except ValueError:
        return None
    zen4 = fields.get("vendor_id") == "AuthenticAMD" and family == ZEN4_FAMILY
    if not zen4 or "avx512f" not in fields.get("flags", "").split():
        return None
    release = _major_minor(numpy_version)
    return None if release is None else AVX512_TARGETS.get(release)


def prefer_avx2_sort(
    environ: MutableMapping[str, str] = os.environ, cpuinfo: Path = Path("/proc/cpuinfo")
) -> str | None:
    """Set ``NPY_DISABLE_CPU_FEATURES`` in ``environ`` where :func:`avx512_targets_to_disable` says so,
    unless it is set already or numpy is imported already (too late to matter); the value set, or None.
    Processes started from this one (uvicorn workers, the embedded PostgreSQL) inherit it."""
    if VARIABLE in environ or "numpy" in sys.modules:
        return None
    try:
        text = cpuinfo.read_text(encoding="utf-8", errors="replace")
        version = importlib.metadata.version("numpy")
    except (OSError, importlib.metadata.PackageNotFoundError):  # not Linux, or no numpy: nothing to do
        return None
    value = avx512_targets_to_disable(text, version)
    if value is not None:
        environ[VARIABLE] = value
    return value


def _major_minor(version: str) -> tuple[int, int] | None:
    parts = version.split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return None
