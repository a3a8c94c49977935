"""The sandbox stops hostile code within its limits; each case is a real child process."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from trustscore.errors import SandboxUnavailable
from trustscore.grading.sandbox import Limits, budget, run_python

FAST = Limits(cpu_s=1, wall_s=3, memory_mb=128)


def run(body: str, limits: Limits = FAST) -> tuple[str, list[tuple[bool, object, str]]]:
    r = run_python(body, "f", [[2]], limits)
    return r.status, [(c.ok, c.value, c.error) for c in r.results]


def test_runs_a_function() -> None:
    assert run("def f(x):\n    return {'x': x, 't': (1, 2)}\n") == ("ok", [(True, {"x": 2, "t": [1, 2]}, "")])


def test_infinite_loop_hits_the_cpu_limit() -> None:
    # A generous wall clock: on a loaded machine 1 s of CPU can take longer than FAST's 3 s of wall time.
    assert run("def f(x):\n    while True:\n        pass\n", Limits(cpu_s=1, wall_s=60))[0] == "cpu-limit"


def test_sleeper_hits_the_wall_clock() -> None:
    status, _ = run("import time\ndef f(x):\n    time.sleep(3600)\n", Limits(cpu_s=1, wall_s=1))
    assert status == "timeout"


def test_fork_bomb_cannot_fork() -> None:
    status, results = run("import os\ndef f(x):\n    while True:\n        os.fork()\n")
    assert status == "ok"
    assert results[0][0] is False
    assert "os.fork" in results[0][2]


def test_memory_hog_hits_the_address_space_limit() -> None:
    status, results = run("def f(x):\n    a = []\n    while True:\n        a.append(bytearray(10**7))\n")
    assert status in ("ok", "killed")
    assert not results or results[0][2].startswith("MemoryError")


@pytest.mark.parametrize("path", ["/etc/passwd", "../../../../etc/hostname", os.path.expanduser("~")])
def test_files_outside_its_directory_are_refused(path: str) -> None:
    status, results = run(f"def f(x):\n    return open({path!r}).read()\n")
    assert status == "ok"
    assert results[0][0] is False
    assert "PermissionError" in results[0][2] or "IsADirectoryError" in results[0][2]


def test_socket_is_refused() -> None:
    status, results = run("import socket\ndef f(x):\n    return socket.socket().connect(('127.0.0.1', 9))\n")
    # Either the import is refused (load-error) or the call raises.
    assert status == "load-error" or results[0][0] is False


def test_socket_module_already_loaded_still_refused() -> None:
    code = "import sys\ndef f(x):\n    import _socket\n    return 1\n"
    status, results = run(code)
    assert status == "ok"
    assert results[0][0] is False


def test_environment_is_empty_and_cwd_is_private() -> None:
    _, results = run("import os\ndef f(x):\n    return sorted(os.environ)\n")
    assert results[0][1] == ["LC_CTYPE", "PYTHONHASHSEED"] or results[0][1] == ["PYTHONHASHSEED"]


def test_process_exit_is_a_crash() -> None:
    assert run("import os\ndef f(x):\n    os._exit(3)\n")[0] == "crashed"


def test_stdout_noise_cannot_forge_results() -> None:
    code = (
        'def f(x):\n    print(\'{"status": "ok", "results": [{"ok": true, "json": "99"}]}\')\n    return 4\n'
    )
    assert run(code) == ("ok", [(True, 4, "")])


def test_a_reports_budget_stops_running_its_sleepers() -> None:
    """Timeouts charge their wall limit; once the budget is spent, runs fail without running."""
    sleeper = "import time\ndef f(x):\n    time.sleep(60)\n"
    with budget(2.5) as spent:
        runs = [run_python(sleeper, "f", [[1]], Limits(cpu_s=1, wall_s=1)) for _ in range(4)]
    assert [r.status for r in runs] == ["timeout", "timeout", "timeout", "killed"]
    assert "budget of 2.5 s is spent" in runs[3].detail and spent.left == pytest.approx(-0.5)
    assert run_python(sleeper.replace("time.sleep(60)", "return x"), "f", [[1]], FAST).status == "ok"


def test_a_lost_zygote_is_no_grade_and_is_replaced() -> None:
    """Infrastructure failure is not the candidate's: no result (503 upstream), and the next run works."""
    from trustscore.grading import sandbox

    assert sandbox.isolation().mode == "kernel"
    fs = sandbox._state.forkserver
    assert fs is not None
    killer = threading.Timer(0.5, os.kill, (fs.pid, signal.SIGKILL))
    killer.start()
    with pytest.raises(SandboxUnavailable, match="retry later"):
        run_python("import time\ndef f(x):\n    time.sleep(30)\n", "f", [[1]], Limits(cpu_s=1, wall_s=20))
    killer.join()
    assert run("def f(x):\n    return x * 3\n") == ("ok", [(True, 6, "")])
