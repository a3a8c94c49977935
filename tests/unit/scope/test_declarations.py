"""agent-card/v2: capability declarations in the document's shape, bounded and strictly checked; v1
cards stay valid (issue #12)."""

from __future__ import annotations

import copy
import json
from typing import Any

import msgspec
import pytest

from tests.helpers import new_card
from trustscore import canonical
from trustscore.cli.agent import card_envelope
from trustscore.errors import InvalidInput
from trustscore.exams.generators.scope import SAMPLE_CAPABILITY
from trustscore.kinds.cards import AgentCard, AgentCardV2, CapabilityDeclaration, declarations_digest
from trustscore.ledger import keys, statements


def decl(**changes: Any) -> dict[str, Any]:
    d = copy.deepcopy(SAMPLE_CAPABILITY)
    for path, value in changes.items():
        target = d
        *parents, leaf = path.split("__")
        for p in parents:
            target = target[p]
        target[leaf] = value
    return d


def card_payload(declarations: list[dict[str, Any]], non: list[str] | None = None) -> bytes:
    key = keys.SigningKey.generate()
    env = card_envelope(key, "v1 shape", model_version="m1")
    stmt = json.loads(canonical.b64decode(env.payload))
    stmt["predicateType"] = stmt["predicateType"].replace("/v1", "/v2")
    stmt["predicate"]["declarations"] = declarations
    stmt["predicate"]["non_capabilities"] = non or []
    return json.dumps(stmt).encode()


def test_a_v2_card_with_declarations_parses() -> None:
    p = statements.parse_statement(card_payload([SAMPLE_CAPABILITY], ["legal advice"])).predicate
    assert isinstance(p, AgentCardV2) and isinstance(p, AgentCard)
    assert p.declarations[0].acceptance_criteria[0].threshold == 950 and p.non_capabilities == [
        "legal advice"
    ]


def test_v1_cards_stay_valid_and_declare_nothing() -> None:
    _key, env = new_card("old", capabilities=["summarises documents"])
    p = statements.parse_statement(canonical.b64decode(env.payload)).predicate
    assert type(p) is AgentCard and p.capabilities == ["summarises documents"]


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"family": "summaries"}, "family must be one of field-extraction, line-total"),
        ({"id": "Bad Id"}, "id 'Bad Id' must be"),
        ({"acceptance_criteria": []}, "1..4 criteria"),
        ({"acceptance_criteria": [{"metric": "vibes", "threshold": 1, "operator": "gte"}]}, "metric 'vibes'"),
        ({"acceptance_criteria": [{"metric": "accuracy", "threshold": 1001, "operator": "gte"}]}, "0..1000"),
        ({"declared_scope__supported_input_types": ["pdf"]}, "supported_input_types"),
        ({"declared_scope__supported_input_types": []}, "supported_input_types"),
        ({"declared_scope__supported_languages": ["en", "en"]}, "supported_languages"),
        ({"declared_scope__max_input_size": 0}, "max_input_size must be 1..200"),
        ({"declared_scope__max_input_size": 10**6}, "max_input_size must be 1..200"),
        ({"declared_scope__excluded_patterns": ["x"] * 9}, "at most 8"),
        ({"name": "x" * 101}, "name must be 1..100"),
        ({"description": "\x00"}, "description must be"),
        ({"last_validated": "yesterday"}, "YYYY-MM-DD"),
        # a claim anything passes is no claim (attack: accuracy >= 0 made every garbage answer a pass)
        (
            {"acceptance_criteria": [{"metric": "accuracy", "threshold": 0, "operator": "gte"}]},
            "must claim a quality",
        ),
        (
            {"acceptance_criteria": [{"metric": "accuracy", "threshold": 950, "operator": "lte"}]},
            "must claim a quality",
        ),
        (
            {"acceptance_criteria": [{"metric": "error_rate", "threshold": 900, "operator": "lte"}]},
            "must claim a quality",
        ),
        (
            {"acceptance_criteria": [{"metric": "latency_ms", "threshold": 1000, "operator": "lte"}]},
            "must claim a quality",
        ),
    ],
)
def test_bad_declarations_are_refused_by_name(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        statements.parse_statement(card_payload([decl(**changes)]))


def test_floats_unknown_fields_and_sizes_are_refused() -> None:
    with pytest.raises(InvalidInput):  # a float threshold: signed payloads carry none
        statements.parse_statement(
            card_payload(
                [decl(acceptance_criteria=[{"metric": "accuracy", "threshold": 0.95, "operator": "gte"}])]
            )
        )
    with pytest.raises(InvalidInput):
        statements.parse_statement(card_payload([decl(surprise=1)]))
    with pytest.raises(InvalidInput, match="at most 8 declarations"):
        statements.parse_statement(card_payload([decl(id=f"c{i}") for i in range(9)]))
    with pytest.raises(InvalidInput, match="ids must be distinct"):
        statements.parse_statement(card_payload([decl(), decl()]))
    with pytest.raises(InvalidInput, match="at most 8 non_capabilities"):
        statements.parse_statement(card_payload([decl()], ["x"] * 9))
    with pytest.raises(InvalidInput, match="non_capabilities"):
        statements.parse_statement(card_payload([decl()], ["y" * 201]))


def test_the_declarations_digest_moves_with_declarations_and_model_version() -> None:
    d = msgspec.convert(SAMPLE_CAPABILITY, CapabilityDeclaration)
    key = keys.SigningKey.generate()

    def digest(**kw: Any) -> str:
        env = card_envelope(key, "a", **kw)
        p = statements.parse_statement(canonical.b64decode(env.payload)).predicate
        assert isinstance(p, AgentCard)
        return declarations_digest(p)

    base = digest(model_version="m1", declarations=[d], non_capabilities=[])
    assert (
        digest(model_version="m1", declarations=[d], non_capabilities=[]) == base
    )  # nonce/time do not count
    assert digest(model_version="m2", declarations=[d], non_capabilities=[]) != base
    assert digest(model_version="m1", declarations=[d], non_capabilities=["legal advice"]) != base
    assert (
        digest(
            model_version="m1", declarations=[msgspec.structs.replace(d, name="other")], non_capabilities=[]
        )
        != base
    )
