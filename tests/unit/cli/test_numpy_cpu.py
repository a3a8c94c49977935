"""numpy's AVX-512 sort is turned off on AMD Zen 4, where it runs ~5x slower than the AVX2 one.

numpy sorts with x86-simd-sort, whose AVX-512 kernels store with ``vpcompressq`` to memory; Zen 4 runs
that form in microcode. On this project's VM (AMD EPYC, family 25) ``np.sort`` of 10^6 int64 took 55 ms
with AVX-512 and 11 ms without, and the scoring engine's sums are one such sort of every counted row."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from trustscore.cli import numpy_cpu
from trustscore.sdk.adapters import SubprocessAgent, agent_from_spec
from trustscore.sdk.agent_api import AgentRequest

ZEN4 = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 17
model name\t: AMD EPYC 9R14
flags\t\t: fpu vme sse sse2 avx avx2 avx512f avx512dq avx512cd avx512bw avx512vl avx512_bf16

processor\t: 1
vendor_id\t: GenuineIntel
"""
ZEN3 = ZEN4.replace(" avx512f avx512dq avx512cd avx512bw avx512vl avx512_bf16", "")
ZEN5 = ZEN4.replace("cpu family\t: 25", "cpu family\t: 26")
INTEL = ZEN4.replace("AuthenticAMD", "GenuineIntel", 1).replace("cpu family\t: 25", "cpu family\t: 6", 1)


@pytest.mark.parametrize(
    ("cpuinfo", "numpy_version", "expected"),
    [
        (ZEN4, "2.4.6", numpy_cpu.ZEN4_DISABLED),
        (ZEN4, "2.5.0rc1", numpy_cpu.ZEN4_DISABLED),
        (ZEN4, "3.0.0", numpy_cpu.ZEN4_DISABLED),
        (ZEN4, "2.3.5", None),  # feature names of its own: left as it is
        (ZEN4, "1.26.4", None),
        (ZEN4, "not a version", None),
        (ZEN4, None, None),  # broken metadata: importlib.metadata.version gives None
        (ZEN3, "2.4.6", None),  # no AVX-512 at all
        (ZEN5, "2.4.6", None),  # Zen 5 stores compressed vectors at full speed
        (INTEL, "2.4.6", None),  # the second processor's vendor is not read
        ("", "2.4.6", None),
        ("vendor_id : AuthenticAMD\ncpu family : twenty-five\nflags : avx512f\n", "2.4.6", None),
    ],
)
def test_which_cpus_lose_avx512(cpuinfo: str, numpy_version: str, expected: str | None) -> None:
    assert numpy_cpu.features_to_disable(cpuinfo, numpy_version) == expected


def test_an_operators_setting_is_kept_even_empty(tmp_path: Path) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(ZEN4)
    environ = {"NPY_DISABLE_CPU_FEATURES": ""}  # empty: the operator keeps AVX-512
    assert numpy_cpu.configure(environ, cpuinfo, imported=False) is None
    assert environ == {"NPY_DISABLE_CPU_FEATURES": ""}


def test_an_operators_enable_list_is_left_alone(tmp_path: Path) -> None:
    """numpy refuses to import with both variables set (review: every command that imported numpy
    failed with an ImportError when NPY_ENABLE_CPU_FEATURES was set)."""
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(ZEN4)
    environ = {"NPY_ENABLE_CPU_FEATURES": "X86_V3"}
    assert numpy_cpu.configure(environ, cpuinfo, imported=False) is None
    assert environ == {"NPY_ENABLE_CPU_FEATURES": "X86_V3"}


def test_nothing_is_set_once_numpy_is_imported(tmp_path: Path) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(ZEN4)
    environ: dict[str, str] = {}
    assert numpy_cpu.configure(environ, cpuinfo, imported=True) is None  # too late: numpy read it already
    assert environ == {}
    assert numpy_cpu.configure(environ, cpuinfo, imported=False) == numpy_cpu.ZEN4_DISABLED
    assert environ == {
        "NPY_DISABLE_CPU_FEATURES": numpy_cpu.ZEN4_DISABLED,
        numpy_cpu.MARKER: numpy_cpu.ZEN4_DISABLED,
    }


def test_the_users_agents_do_not_inherit_it() -> None:
    """What configure set is the CLI's choice for its own numpy; an agent command it starts for the user
    gets the environment without it (review: a cmd: agent's numpy silently lost AVX-512). An operator's
    own value (no marker, or changed since) is passed on."""
    assert numpy_cpu.others_environ({"PATH": "/bin"}) is None  # nothing set here: inherit everything
    mine = {"PATH": "/bin", "NPY_DISABLE_CPU_FEATURES": "X86_V4", numpy_cpu.MARKER: "X86_V4"}
    assert numpy_cpu.others_environ(mine) == {"PATH": "/bin"}
    changed = {"NPY_DISABLE_CPU_FEATURES": "AVX512_SPR", numpy_cpu.MARKER: "X86_V4"}
    assert numpy_cpu.others_environ(changed) == {"NPY_DISABLE_CPU_FEATURES": "AVX512_SPR"}


def test_an_agent_started_with_others_environ_sees_no_setting(tmp_path: Path) -> None:
    agent_file = tmp_path / "env_agent.py"
    agent_file.write_text(
        "import os\n\ndef answer(request):\n    return os.environ.get('NPY_DISABLE_CPU_FEATURES', 'unset')\n"
    )
    environ = {k: v for k, v in os.environ.items() if k != "NPY_DISABLE_CPU_FEATURES"}
    environ.update({"NPY_DISABLE_CPU_FEATURES": "X86_V4", numpy_cpu.MARKER: "X86_V4"})
    environ["PYTHONPATH"] = os.pathsep.join(sys.path)
    request = AgentRequest(exam="e", item_id="i", turn=1, messages=[])
    spec = f"python:{agent_file}:answer"  # a child process (sdk/pyworker.py), as a cmd: agent is
    inherited, cleaned = (
        agent_from_spec(spec, environ),
        agent_from_spec(spec, numpy_cpu.others_environ(environ)),
    )
    try:
        assert inherited.ask(request, 30) == "X86_V4"
        assert cleaned.ask(request, 30) == "unset"
    finally:
        for agent in (inherited, cleaned):
            agent.close()
    command = agent_from_spec("cmd:true", {"A": "1"})
    assert isinstance(command, SubprocessAgent) and command.env == {"A": "1"}


def _run(code: str, **extra: str) -> list[str]:
    """Run ``code`` in a fresh interpreter (numpy not yet imported), the operator's setting removed."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NPY_")} | extra
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "cannot disable" not in out.stderr, out.stderr  # numpy knows every name given
    return out.stdout.split()[-2:]  # the last line: what SHOW prints


SHOW = (
    "import numpy; from numpy._core._multiarray_umath import __cpu_features__ as f\n"
    "print(repr(os.environ.get('NPY_DISABLE_CPU_FEATURES')).replace(' ', '_'), f.get('X86_V4'))"
)


def test_the_names_take_effect_in_the_installed_numpy(tmp_path: Path) -> None:
    """With a Zen 4 cpuinfo, numpy imported afterwards runs without its AVX-512 kernels (a feature
    renamed by a later numpy would leave them on, and this fails on a machine with AVX-512)."""
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(ZEN4)
    expected = numpy_cpu.features_to_disable(ZEN4, version("numpy"))
    shown = _run(
        f"import os, pathlib; from trustscore.cli import numpy_cpu\n"
        f"numpy_cpu.configure(os.environ, pathlib.Path({str(cpuinfo)!r}))\n{SHOW}"
    )
    assert shown[0] == repr(expected).replace(" ", "_")
    assert expected is None or shown[1] == "False"


def test_the_command_settles_it_before_numpy() -> None:
    """``trustscore`` (cli.main.main) sets it first thing, on this machine's real CPU: numpy, imported by
    the commands it loads, runs without AVX-512 on Zen 4."""
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        cpuinfo = ""
    expected = numpy_cpu.features_to_disable(cpuinfo, version("numpy"))
    shown = _run(
        "import os, sys; from trustscore.cli.main import main\n"
        f"try:\n    main(['--version'])\nexcept SystemExit:\n    pass\n{SHOW}"
    )
    assert shown[0] == repr(expected).replace(" ", "_")
    assert expected is None or shown[1] == "False"
    # An operator's NPY_ENABLE_CPU_FEATURES: the command leaves it alone and numpy imports.
    shown = _run(
        "import os, sys; from trustscore.cli.main import main\n"
        f"try:\n    main(['--version'])\nexcept SystemExit:\n    pass\n{SHOW}",
        NPY_ENABLE_CPU_FEATURES="X86_V3",
    )
    assert shown[0] == "None"


def test_a_process_without_avx512_publishes_the_same_numbers() -> None:
    """The pinned outputs of every released model, the rounding-boundary cases of ``adjusted`` and the
    medals, and the medal tests, in a process whose numpy runs without AVX-512 (what the command sets on
    Zen 4): the same numbers as in this process (with AVX-512 where the CPU has it)."""
    tests = Path(__file__).resolve().parents[1] / "scoring"
    env = dict(os.environ, NPY_DISABLE_CPU_FEATURES=numpy_cpu.ZEN4_DISABLED)
    files = [str(tests / f) for f in ("test_scoring_pinned.py", "test_scoring_powers.py", "test_medals.py")]
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *files],
        env=env,
        cwd=tests.parents[2],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert " passed" in out.stdout and "failed" not in out.stdout
