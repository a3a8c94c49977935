"""numpy's CPU dispatch for this process, settled before numpy is imported.

numpy sorts with x86-simd-sort, whose AVX-512 kernels store each partitioned vector with the memory form
of ``vpcompressq``, which AMD Zen 4 (family 19h) runs in microcode (AMD's Zen 4 optimisation guide, 2.11.2:
"avoid the memory destination form of COMPRESS instructions"). On this project's VM, an AMD EPYC of that
family, ``np.sort`` of 10^6 int64 takes 55 ms with those kernels and 11 ms with the AVX2 ones, and the
scoring engine's cell sums are one such sort of every counted row (``bench/scoring.py``). OpenJDK turns
its AVX-512 sort off on that family for the same reason (JDK-8317976); numpy offers no switch for the sort
alone, only ``NPY_DISABLE_CPU_FEATURES``, read once when numpy is imported. So the ``trustscore`` command
sets it first thing, on Zen 4 only, to the AVX-512 targets of numpy >= 2.4 (older versions name their
targets otherwise and are left as they are).

Results do not change: no number the engine publishes reads a numpy function whose bits depend on the
vector width (its sums run in a public order, its decay by a portable exp2, its freshness factors by the C
library's pow; ``docs/methodology.md``, "Powers"). An operator's own ``NPY_DISABLE_CPU_FEATURES`` is
kept, even empty (which keeps AVX-512 on), and so is any ``NPY_ENABLE_CPU_FEATURES`` (numpy refuses to
start with both set). The user's own agent commands that the CLI starts get the environment without the
setting (:func:`others_environ`): their numpy is theirs to configure.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping, MutableMapping
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

VARIABLE = "NPY_DISABLE_CPU_FEATURES"
ENABLE = "NPY_ENABLE_CPU_FEATURES"  # numpy refuses to import with both set
MARKER = "TRUSTSCORE_SET_NPY_DISABLE_CPU_FEATURES"  # the value configure set: not the operator's
#: numpy >= 2.4's AVX-512 dispatch targets (X86_V4 is AVX-512 F, CD, BW, DQ and VL).
ZEN4_DISABLED = "X86_V4 AVX512_ICL AVX512_SPR"
ZEN4_FAMILY = 25  # AMD family 19h: Zen 3 (no AVX-512) and Zen 4; Zen 5 is 1Ah and stores at full speed
CPUINFO = Path("/proc/cpuinfo")
MAX_CPUINFO = 1 << 16  # the first processor's lines are well within this


def features_to_disable(cpuinfo: str, numpy_version: str | None) -> str | None:
    """The value of NPY_DISABLE_CPU_FEATURES for the first processor described by ``cpuinfo`` (Linux's
    /proc/cpuinfo text) and ``numpy_version``: :data:`ZEN4_DISABLED` on Zen 4 with numpy >= 2.4, else None."""
    release = None if numpy_version is None else re.match(r"(\d+)\.(\d+)", numpy_version)
    if release is None or (int(release[1]), int(release[2])) < (2, 4):
        return None
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        if not line.strip():
            break  # the end of the first processor
        name, _, value = line.partition(":")
        fields.setdefault(name.strip(), value.strip())
    zen4 = (
        fields.get("vendor_id") == "AuthenticAMD"
        and fields.get("cpu family") == str(ZEN4_FAMILY)
        and "avx512f" in fields.get("flags", "").split()
    )
    return ZEN4_DISABLED if zen4 else None


def configure(
    environ: MutableMapping[str, str], cpuinfo: Path = CPUINFO, *, imported: bool | None = None
) -> str | None:
    """Set NPY_DISABLE_CPU_FEATURES in ``environ`` where :func:`features_to_disable` says so, unless it or
    NPY_ENABLE_CPU_FEATURES is set already or numpy is ``imported`` (default: in this process; then it
    would be too late). Returns the value set, or None; :data:`MARKER` records it."""
    if imported is None:
        imported = "numpy" in sys.modules
    if VARIABLE in environ or ENABLE in environ or imported:
        return None
    try:
        with cpuinfo.open(encoding="utf-8", errors="replace") as f:
            text = f.read(MAX_CPUINFO)
        numpy_version = version("numpy")
    except (OSError, PackageNotFoundError):
        return None
    value = features_to_disable(text, numpy_version)
    if value is not None:
        environ[VARIABLE] = environ[MARKER] = value
    return value


def others_environ(environ: Mapping[str, str]) -> dict[str, str] | None:
    """The environment for a program the CLI starts for the user (an agent command): ``environ`` without
    the setting :func:`configure` made, or None (inherit it all) where it made none."""
    set_here = environ.get(MARKER)
    if set_here is None:
        return None
    dropped = (MARKER, VARIABLE) if environ.get(VARIABLE) == set_here else (MARKER,)
    return {k: v for k, v in environ.items() if k not in dropped}
