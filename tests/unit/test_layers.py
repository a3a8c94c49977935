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


def test_the_log_format_reaches_no_statement_kind_exam_score_or_evidence() -> None:
    """Issue #18: ledger/ imported scoring, evidence, exams and reverify; it must reach none of them,
    not even through another package."""
    import grimp

    graph = grimp.build_graph("trustscore", cache_dir=None)
    for higher in ("kinds", "exams", "scoring", "evidence", "reverify", "attestations", "grading"):
        chain = graph.find_shortest_chain(importer="trustscore.ledger", imported=f"trustscore.{higher}")
        assert chain is None, f"ledger reaches {higher}: {' -> '.join(chain or ())}"


def test_graders_do_not_import_their_registry() -> None:
    """Issue #18: the registry imported every grader and every grader imported the registry back."""
    import grimp

    graph = grimp.build_graph("trustscore", cache_dir=None)
    graders = graph.find_modules_directly_imported_by("trustscore.grading.registry")
    assert "trustscore.grading.exact" in graders
    back = {
        g for g in graders if graph.find_shortest_chain(importer=g, imported="trustscore.grading.registry")
    }
    assert back == set()
