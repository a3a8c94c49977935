"""numpy's AVX-512 sort is turned off on AMD Zen 4 only, only where its target names are known, never
over the operator's own setting, and before the command imports numpy (src/trustscore/simd.py)."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from trustscore import simd

ZEN4 = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 17
model name\t: AMD EPYC
flags\t\t: fpu vme sse sse2 avx avx2 avx512f avx512dq avx512cd avx512bw avx512vl avx512_bf16

processor\t: 1
vendor_id\t: AuthenticAMD
cpu family\t: 25
flags\t\t: fpu vme sse sse2 avx avx2 avx512f
"""
OFF = "X86_V4 AVX512_ICL AVX512_SPR"


def cpu(vendor: str = "AuthenticAMD", family: str = "25", flags: str = "avx2 avx512f") -> str:
    return f"processor\t: 0\nvendor_id\t: {vendor}\ncpu family\t: {family}\nflags\t\t: {flags}\n"


def test_zen4_with_avx512_under_numpy_2_4_disables_its_avx512_targets() -> None:
    assert simd.avx512_targets_to_disable(ZEN4, "2.4.6") == OFF
    assert simd.avx512_targets_to_disable(ZEN4, "2.4.0rc1") == OFF


@pytest.mark.parametrize(
    "cpuinfo",
    [
        cpu(flags="avx2"),  # Zen 3: family 19h without AVX-512
        cpu(family="26"),  # Zen 5: stores a compress to memory quickly
        cpu(vendor="GenuineIntel", family="6"),  # the CPUs x86-simd-sort's AVX-512 path was tuned on
        cpu(family="twenty-five"),
        cpu(flags="avx2 avx512fp16"),  # a flag that merely starts with avx512f
        "",
        "vendor_id: AuthenticAMD\n\n\ncpu family: 25\nflags: avx512f\n",  # the first block says no family
    ],
)
def test_other_cpus_keep_numpys_choice(cpuinfo: str) -> None:
    assert simd.avx512_targets_to_disable(cpuinfo, "2.4.6") is None


@pytest.mark.parametrize("version", ["2.5.0", "1.26.4", "3.0.0", "2", "", "two.four"])
def test_a_numpy_whose_target_names_are_not_known_is_left_alone(version: str) -> None:
    assert simd.avx512_targets_to_disable(ZEN4, version) is None


def test_the_names_are_dispatch_targets_of_the_installed_numpy() -> None:
    """A wrong name makes numpy warn and ignore the whole variable: the table must match numpy."""
    dispatch = importlib.import_module("numpy._core._multiarray_umath").__cpu_dispatch__
    major, minor = (int(part) for part in np.__version__.split(".")[:2])
    release = (major, minor)
    if release not in simd.AVX512_TARGETS:
        pytest.skip(f"numpy {np.__version__} is not in simd.AVX512_TARGETS: Zen 4 keeps numpy's choice")
    names = simd.AVX512_TARGETS[release].split()
    assert set(names) <= set(dispatch)
    assert {"X86_V3"} <= set(dispatch) - set(names)  # the AVX2 path stays


def test_an_operator_setting_is_kept_even_empty(tmp_path: Path) -> None:
    info = tmp_path / "cpuinfo"
    info.write_text(ZEN4)
    for preset in ("", "AVX512_SPR"):
        environ = {simd.VARIABLE: preset}
        assert simd.prefer_avx2_sort(environ, info) is None
        assert environ == {simd.VARIABLE: preset}


def test_nothing_is_set_once_numpy_is_imported_or_without_cpuinfo(tmp_path: Path) -> None:
    info = tmp_path / "cpuinfo"
    info.write_text(ZEN4)
    environ: dict[str, str] = {}
    assert "numpy" in sys.modules  # this test process: too late to matter
    assert simd.prefer_avx2_sort(environ, info) is None
    assert environ == {}
    assert simd.prefer_avx2_sort(environ, tmp_path / "absent") is None


def _command_then_numpy(environ: dict[str, str]) -> list[str]:
    """Run the ``trustscore`` command's entry (``--version``) in a fresh interpreter, then import numpy:
    the variable as numpy saw it and whether numpy uses its X86_V4 (AVX-512) targets."""
    script = (
        "import os, sys\n"
        "from trustscore.cli.main import main\n"
        "try:\n"
        "    main(['--version'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "import numpy\n"
        "from numpy._core._multiarray_umath import __cpu_features__ as f\n"
        "print(repr(os.environ.get('NPY_DISABLE_CPU_FEATURES')), f.get('X86_V4'), sep='|')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], env=environ, capture_output=True, text=True, timeout=60, check=True
    )
    assert "cannot disable" not in done.stderr  # numpy's warning for a name it does not dispatch
    return done.stdout.splitlines()[-1].split("|")


def test_the_command_sets_it_before_numpy_loads_on_this_machine() -> None:
    """On a Zen 4 machine (as the project's VM is) numpy then runs without AVX-512; elsewhere nothing
    changes. Either way the expectation comes from this machine's own /proc/cpuinfo."""
    environ = {k: v for k, v in os.environ.items() if k != simd.VARIABLE}
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
    except OSError:
        pytest.skip("no /proc/cpuinfo")
    expected = simd.avx512_targets_to_disable(cpuinfo, np.__version__)
    variable, x86_v4 = _command_then_numpy(environ)
    assert variable == repr(expected)
    if expected is not None:
        assert x86_v4 == "False"

    variable, _ = _command_then_numpy({**environ, simd.VARIABLE: ""})
    assert variable == "''"
