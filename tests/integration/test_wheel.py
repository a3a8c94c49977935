"""A built wheel works without the repository: it carries the exams, weights, grader vectors, docs and
example agents inside the package (trustscore/_data), and the CLI finds them there."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

RUN_CLI = (
    "import sys; sys.path.insert(0, sys.argv.pop(1)); from trustscore.cli.main import main; sys.exit(main())"
)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel built from this checkout, installed (without dependencies) into a fresh directory."""
    base = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", base, ROOT],
        check=True,
        capture_output=True,
    )
    [wheel] = base.glob("trustscore-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for expected in (
        "trustscore/_data/weights/trustscore-v1.toml",
        "trustscore/_data/weights/trustscore-v2.toml",
        "trustscore/_data/exams/capability/v1.json",
        "trustscore/_data/docs/methodology.md",
        "trustscore/_data/examples/agents/scripted.py",
        "trustscore/store/migrations/0001_log.sql",
        "trustscore/py.typed",
        "trustscore/api/templates/agent.html",  # the pages (docs/pages.md) are served from the package
        "trustscore/api/static/verify.js",
    ):
        assert expected in names, expected
    # Only the package and its metadata: nothing else of the checkout, no bytecode left lying around.
    assert all(n.startswith(("trustscore/", "trustscore-")) for n in names), sorted(names)
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    target = base / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", target, wheel],
        check=True,
        capture_output=True,
    )
    return target


def cli(site: Path, *args: str, cwd: Path) -> str:
    r = subprocess.run(
        [sys.executable, "-c", RUN_CLI, str(site), *args], capture_output=True, text=True, cwd=cwd
    )
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_installed_wheel_finds_its_data(installed: Path, tmp_path: Path) -> None:
    where = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; sys.path.insert(0, sys.argv[1]); from trustscore import resources; "
            "print(resources.ROOT)",
            str(installed),
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    ).stdout.strip()
    assert Path(where) == installed / "trustscore" / "_data"
    exams = cli(installed, "exam", "list", cwd=tmp_path)
    assert "capability@1" in exams and "security@1" in exams
    # Score one evidence file offline with the bundled weights: the same number as from the checkout.
    evidence = tmp_path / "evidence.jsonl"
    evidence.write_text(
        '{"agent":"ts1_' + "a" * 40 + '","dimension":"capability","source":"verified",'
        '"at":"2026-11-01T00:00:00Z","value":80.0,"key":"q1"}\n'
    )
    weights = installed / "trustscore" / "_data" / "weights" / "baseline-v0.3.toml"
    args = ("score", "--weights", str(weights), "--evidence", str(evidence), "--at", "2026-11-30T00:00:00Z")
    from_wheel = cli(installed, *args, cwd=tmp_path)
    from_checkout = subprocess.run(
        [
            sys.executable,
            "-m",
            "trustscore.cli.main",
            *args[:1],
            "--weights",
            str(ROOT / "weights" / weights.name),
            *args[3:],
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    ).stdout
    assert from_wheel == from_checkout and from_wheel.strip()
