"""The items of a server scope run (``kinds/scope_run.py``), regenerated from its signed seed."""

from __future__ import annotations

from trustscore import canonical
from trustscore.errors import VerificationError
from trustscore.exams.forms import instantiate, items_digest
from trustscore.grading.model import Item
from trustscore.kinds.scope_run import ScopeRun, seed_message, sitting_seed
from trustscore.ledger import keys


def check_items(run: ScopeRun, verifier_key: bytes) -> list[Item]:
    """Raise unless the run's items are the ones its signed seed determines; return them."""
    keys.verify(
        verifier_key,
        seed_message(run.agent, run.run_key, run.declarations_digest),
        canonical.b64decode(run.seed_signature, what="seed_signature"),
    )
    items = instantiate(run.form, sitting_seed(canonical.b64decode(run.seed_signature)))
    if items_digest(items) != run.items_digest:
        raise VerificationError("the run's items are not the ones its seed determines")
    return items
