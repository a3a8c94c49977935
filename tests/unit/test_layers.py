"""The layer order of docs/architecture.md holds: import-linter's contracts in pyproject.toml pass.

A module that imports from a layer above its own, or two packages that import each other, fails here with
import-linter's report naming the offending imports.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_import_contracts_are_kept() -> None:
    lint = Path(sys.executable).parent / "lint-imports"
    done = subprocess.run(
        [str(lint), "--no-cache", "--no-logo", str(ROOT / "pyproject.toml")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert "Contracts: 2 kept, 0 broken." in done.stdout


def test_the_contract_catches_an_upward_import(tmp_path: Path) -> None:
    """The contract is not vacuous: a copy of the configuration with the order reversed must fail."""
    text = (ROOT / "pyproject.toml").read_text()
    start = text.index("layers = [")
    end = text.index("]", start)
    lines = text[start:end].splitlines()
    flipped = "\n".join([lines[0], *reversed(lines[1:])])
    config = tmp_path / "pyproject.toml"
    config.write_text(text[:start] + flipped + text[end:])
    lint = Path(sys.executable).parent / "lint-imports"
    done = subprocess.run(
        [str(lint), "--no-cache", "--no-logo", str(config)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode != 0
    assert "BROKEN" in done.stdout
