"""Small helpers shared by command modules."""

from __future__ import annotations

from pathlib import Path

from trustscore.ledger import note


def verifier(arg: str) -> note.Verifier:
    """The log verifier key given on the command line, as text or as a file holding it."""
    path = Path(arg)
    text = path.read_text().strip() if path.is_file() else arg.strip()
    return note.parse_verifier_key(text)
