"""Where the published data lives: exam sets, weights files, grader vectors, docs and example agents.

In a source checkout (and an editable install) they are the repository's top-level folders. A wheel
carries them inside the package as ``trustscore/_data/`` (pyproject.toml maps them in), so an installed
``trustscore`` finds the same files without the repository.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent
_BUNDLED = _PACKAGE / "_data"

#: The folder holding ``exams/``, ``weights/``, ``graders/``, ``docs/`` and ``examples/``.
ROOT = _BUNDLED if _BUNDLED.is_dir() else _PACKAGE.parents[1]


def path(*parts: str) -> Path:
    """A path under :data:`ROOT`, e.g. ``path("weights", "trustscore-v1.toml")``."""
    return ROOT.joinpath(*parts)
