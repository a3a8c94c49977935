"""``scope-run/v1``: the kind's checks and admission rule, each attack first (docs/scope-honesty.md, 5)."""

from __future__ import annotations

import msgspec
import pytest

from trustscore import canonical
from trustscore.errors import InvalidInput, TrustscoreError, UnknownSigner, VerificationError
from trustscore.exams.forms import instantiate, items_digest, scope_form
from trustscore.exams.scope_items import check_items
from trustscore.kinds.admission import Registration, admit
from trustscore.kinds.cards import CapabilityDeclaration
from trustscore.kinds.graded import GradedItem
from trustscore.kinds.scope_run import (
    ScopeAnswer,
    ScopeRun,
    make_scope_run,
    run_nonce,
    seed_message,
    sitting_seed,
)
from trustscore.ledger import keys, statements

VERIFIER = keys.SigningKey.generate()
AGENT = keys.SigningKey.generate()
DECL = msgspec.convert(
    {
        "id": "invoice-fields",
        "name": "Invoice field extraction",
        "description": "Extracts header fields.",
        "family": "field-extraction",
        "acceptance_criteria": [{"metric": "accuracy", "threshold": 950, "operator": "gte"}],
        "declared_scope": {"supported_input_types": ["json"], "max_input_size": 5,
                           "supported_languages": ["en"], "excluded_patterns": []},
        "validated_against_model_version": "m-1",
    },
    CapabilityDeclaration,
)  # fmt: skip
DIGEST = "sha256:" + "a" * 64


def run(**kw: object) -> ScopeRun:
    form = scope_form([DECL], ["legal advice"])
    signature = VERIFIER.sign(seed_message(AGENT.id, "week:3000", DIGEST))
    items = instantiate(form, sitting_seed(signature))
    fields: dict[str, object] = dict(
        nonce=run_nonce(AGENT.id, "week:3000"), issued_at="2031-03-03T12:00:00Z", verifier=VERIFIER.id,
        agent=AGENT.id, trigger="schedule", run_key="week:3000", card_index=4, declarations_digest=DIGEST,
        model_version="m-1", endpoint="https://agent.example/api", exam="scope@1", form=form,
        seed_signature=canonical.b64encode(signature), items_digest=items_digest(items),
        answers=[ScopeAnswer(item_id=i.id, sha256=None, error="no answer") for i in items],
        items=[GradedItem(item_id=i.id, dimension=i.dimension, grader=i.grader, value_millis=0,
                          result="failure") for i in items],
        ran_at="2031-03-03T12:00:00Z",
    )  # fmt: skip
    fields.update(kw)
    return ScopeRun(**fields)  # type: ignore[arg-type]


def registry(**roles: tuple[str, ...]) -> dict[str, Registration]:
    return {
        VERIFIER.id: Registration(
            VERIFIER.id, VERIFIER.public_key, "service", None, roles.get("v", ("reverify",))
        ),
        AGENT.id: Registration(AGENT.id, AGENT.public_key, "agent"),
    }


def test_a_run_round_trips_and_its_items_are_the_signed_seeds() -> None:
    r = run()
    parsed = statements.parse_statement(make_scope_run(r))
    assert parsed.predicate == r and parsed.facts.signer == VERIFIER.id and parsed.facts.subject == AGENT.id
    assert len(check_items(r, VERIFIER.public_key)) == len(r.items)
    admit(parsed, [VERIFIER.id], registry().get, "log")


def test_items_not_from_the_signed_seed_are_caught() -> None:
    other = VERIFIER.sign(seed_message(AGENT.id, "week:3001", DIGEST))  # a seed the server liked better
    with pytest.raises(TrustscoreError):
        check_items(run(seed_signature=canonical.b64encode(other)), VERIFIER.public_key)
    with pytest.raises(VerificationError):
        check_items(run(items_digest="sha256:" + "0" * 64), VERIFIER.public_key)


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"run_key": "whenever"}, "run_key"),
        ({"exam": "capability@1"}, "exam must be"),
        ({"verifier": AGENT.id}, "its own"),
        ({"answers": []}, "answers must name"),
        ({"seed_signature": canonical.b64encode(b"short")}, "64-byte"),
    ],
)
def test_malformed_runs_are_refused(change: dict[str, object], words: str) -> None:
    with pytest.raises(InvalidInput, match=words):
        make_scope_run(run(**change))


def test_an_unanswered_item_must_say_why() -> None:
    r = run()
    answers = [msgspec.structs.replace(r.answers[0], error=None), *r.answers[1:]]
    with pytest.raises(InvalidInput, match="must say why"):
        make_scope_run(run(answers=answers))


def test_only_a_reverify_service_key_may_log_a_run_about_a_registered_agent() -> None:
    parsed = statements.parse_statement(make_scope_run(run()))
    with pytest.raises(InvalidInput, match="no reverify role"):
        admit(parsed, [VERIFIER.id], registry(v=("grader",)).get, "log")  # the grader key cannot
    with pytest.raises(UnknownSigner):
        admit(parsed, [VERIFIER.id], {AGENT.id: registry()[AGENT.id]}.get, "log")  # an unknown signer
    with pytest.raises(UnknownSigner, match=r"agent .* is not registered"):  # the re-verification rule
        admit(parsed, [VERIFIER.id], {VERIFIER.id: registry()[VERIFIER.id]}.get, "log")
