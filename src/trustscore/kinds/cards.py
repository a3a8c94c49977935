"""The agent card: an agent registers its key, name and what it declares about itself."""

from __future__ import annotations

import hashlib
import re
from typing import Literal

import msgspec

from trustscore import canonical
from trustscore.errors import InvalidInput
from trustscore.ledger import keys
from trustscore.ledger.statements import (
    Facts,
    Kind,
    Predicate,
    Statement,
    Subject,
    check_endpoint,
    check_text,
    register,
)

MAX_CAPABILITIES = 64


class AgentCard(Predicate, kw_only=True, frozen=True):
    public_key: str  # base64 of the raw 32-byte Ed25519 key
    name: str
    endpoint: str | None = None
    model: str | None = None
    model_version: str | None = None
    capabilities: list[str] = msgspec.field(default_factory=list)
    controller_key: str | None = None  # base64 key of an operator controlling this agent; it co-signs


def controller_facts(controller_key: str | None, own: bytes) -> tuple[tuple[str, bytes], ...]:
    """The co-signer a card with ``controller_key`` needs: the controller itself (never the card's key)."""
    if controller_key is None:
        return ()
    key = canonical.b64decode(controller_key, what="controller_key")
    if len(key) != 32:
        raise InvalidInput("controller_key must be a 32-byte Ed25519 key")
    if key == own:
        raise InvalidInput("controller_key must differ from the card's own key")
    return ((keys.key_id(key), key),)


def card_subject(public_key: bytes) -> Subject:
    return Subject(name=keys.key_id(public_key), digest={"sha256": hashlib.sha256(public_key).hexdigest()})


def _check_card(stmt: Statement, card: AgentCard) -> Facts:
    public = canonical.b64decode(card.public_key, what="public_key")
    if len(public) != 32:
        raise InvalidInput("public_key must be a 32-byte Ed25519 key")
    if stmt.subject != [card_subject(public)]:
        raise InvalidInput("agent card subject must be the id and SHA-256 of its public key")
    check_text(card.name, what="name")
    if card.endpoint is not None:
        check_endpoint(card.endpoint, what="endpoint")
    for field, value in (("model", card.model), ("model_version", card.model_version)):
        if value is not None:
            check_text(value, what=field)
    if len(card.capabilities) > MAX_CAPABILITIES:
        raise InvalidInput(f"at most {MAX_CAPABILITIES} capabilities")
    for c in card.capabilities:
        check_text(c, what="capability", max_len=100)
    agent = keys.key_id(public)
    return Facts(
        signer=agent,
        subject=agent,
        introduces_key=public,
        cosigners=controller_facts(card.controller_key, public),
    )


AGENT_CARD = register(Kind(name="agent-card", version=1, struct=AgentCard, check=_check_card))


# --- agent-card/v2: capability declarations (docs/scope-honesty.md) -------------------------------------

#: Capability families the bureau can probe deterministically (a declaration names one).
FAMILIES = ("field-extraction", "line-total")
#: Input types and languages a declaration may claim (probes also use others, beyond any claim).
INPUT_TYPES = ("json", "csv", "text")
LANGUAGES = ("en", "es", "fr", "de")
METRICS = ("accuracy", "error_rate", "latency_ms")  # per-mille, per-mille, milliseconds
MAX_DECLARATIONS = 8
MAX_NON_CAPABILITIES = 8
MAX_CRITERIA = 4
MAX_EXCLUDED = 8
MAX_INPUT_SIZE = 200  # line items
MIN_ACCURACY = 500  # per-mille: the weakest quality claim a declaration may make
_ID = re.compile(r"[a-z0-9][a-z0-9-]{0,31}", re.ASCII)


class AcceptanceCriterion(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    """``metric operator threshold``; thresholds are integers: per-mille for ``accuracy`` and
    ``error_rate`` (0.95 is 950), milliseconds for ``latency_ms`` (no floats in signed payloads)."""

    metric: str
    threshold: int
    operator: Literal["gte", "lte", "eq"]


class DeclaredScope(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    supported_input_types: list[str]
    max_input_size: int  # line items per input document
    supported_languages: list[str]
    excluded_patterns: list[str] = msgspec.field(default_factory=list)


class CapabilityDeclaration(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    """The source document's ``CapabilityDeclaration`` (snake_case), plus ``family``: which probe library
    tests it. ``last_validated`` is the agent's own claim (a date), not the bureau's."""

    id: str
    name: str
    description: str
    family: str
    acceptance_criteria: list[AcceptanceCriterion]
    declared_scope: DeclaredScope
    validated_against_model_version: str
    last_validated: str | None = None


def check_declaration(d: CapabilityDeclaration) -> None:
    """Raise :class:`InvalidInput` naming the declaration and field unless ``d`` is well formed."""
    if not _ID.fullmatch(d.id):
        raise InvalidInput(f"declarations: id {d.id!r} must be 1..32 of [a-z0-9-], starting alphanumeric")
    where = f"declarations[{d.id}]"
    check_text(d.name, what=f"{where}.name", max_len=100)
    check_text(d.description, what=f"{where}.description", max_len=500)
    check_text(d.validated_against_model_version, what=f"{where}.validated_against_model_version")
    if d.last_validated is not None and not re.fullmatch(r"\d{4}-\d{2}-\d{2}", d.last_validated):
        raise InvalidInput(f"{where}.last_validated must be a date YYYY-MM-DD")
    if d.family not in FAMILIES:
        raise InvalidInput(f"{where}.family must be one of {', '.join(FAMILIES)} (the probe libraries)")
    if not 1 <= len(d.acceptance_criteria) <= MAX_CRITERIA:
        raise InvalidInput(f"{where}.acceptance_criteria must hold 1..{MAX_CRITERIA} criteria")
    for c in d.acceptance_criteria:
        if c.metric not in METRICS:
            raise InvalidInput(f"{where}: metric {c.metric!r} must be one of {', '.join(METRICS)}")
        top = 600_000 if c.metric == "latency_ms" else 1000
        if not 0 <= c.threshold <= top:
            raise InvalidInput(f"{where}: {c.metric} threshold must be an integer 0..{top}")
    if not any(
        (c.metric == "accuracy" and c.operator in ("gte", "eq") and c.threshold >= MIN_ACCURACY)
        or (c.metric == "error_rate" and c.operator in ("lte", "eq") and c.threshold <= 1000 - MIN_ACCURACY)
        for c in d.acceptance_criteria
    ):
        raise InvalidInput(
            f"{where}.acceptance_criteria must claim a quality: accuracy gte >= {MIN_ACCURACY} or error_rate "
            f"lte <= {1000 - MIN_ACCURACY} (per-mille); a claim anything passes is no claim"
        )
    s = d.declared_scope
    for values, known, what in (
        (s.supported_input_types, INPUT_TYPES, "supported_input_types"),
        (s.supported_languages, LANGUAGES, "supported_languages"),
    ):
        if not values or len(set(values)) != len(values) or not set(values) <= set(known):
            raise InvalidInput(
                f"{where}.declared_scope.{what}: 1..{len(known)} distinct of {', '.join(known)}"
            )
    if not 1 <= s.max_input_size <= MAX_INPUT_SIZE:
        raise InvalidInput(f"{where}.declared_scope.max_input_size must be 1..{MAX_INPUT_SIZE}")
    if len(s.excluded_patterns) > MAX_EXCLUDED:
        raise InvalidInput(f"{where}.declared_scope.excluded_patterns: at most {MAX_EXCLUDED}")
    for p in s.excluded_patterns:
        check_text(p, what=f"{where}.declared_scope.excluded_patterns[]")


class AgentCardV2(AgentCard, kw_only=True, frozen=True):
    """An agent card with capability declarations and explicit non-capabilities (v1 cards stay valid
    and simply declare nothing)."""

    declarations: list[CapabilityDeclaration] = msgspec.field(default_factory=list)
    non_capabilities: list[str] = msgspec.field(default_factory=list)


def _check_card_v2(stmt: Statement, card: AgentCardV2) -> Facts:
    facts = _check_card(stmt, card)
    if len(card.declarations) > MAX_DECLARATIONS:
        raise InvalidInput(f"at most {MAX_DECLARATIONS} declarations")
    if len({d.id for d in card.declarations}) != len(card.declarations):
        raise InvalidInput("declarations: ids must be distinct")
    for d in card.declarations:
        check_declaration(d)
    if len(card.non_capabilities) > MAX_NON_CAPABILITIES:
        raise InvalidInput(f"at most {MAX_NON_CAPABILITIES} non_capabilities")
    for n in card.non_capabilities:
        check_text(n, what="non_capabilities[]")
    return facts


AGENT_CARD_V2 = register(Kind(name="agent-card", version=2, struct=AgentCardV2, check=_check_card_v2))
CARD_PREDICATE_TYPES = (AGENT_CARD.predicate_type, AGENT_CARD_V2.predicate_type)
#: The agent cards that can declare capabilities (:func:`declarations_of`: a v1 card declares nothing).
DECLARING_PREDICATE_TYPES = (AGENT_CARD_V2.predicate_type,)


def declarations_of(card: AgentCard) -> tuple[list[CapabilityDeclaration], list[str]]:
    """What a card declares (a v1 card: nothing)."""
    if isinstance(card, AgentCardV2):
        return list(card.declarations), list(card.non_capabilities)
    return [], []


def declarations_digest(card: AgentCard) -> str:
    """``sha256:<hex>`` of the canonical declarations, non-capabilities and model version: what a scope
    evaluation is valid for (a change needs a new evaluation)."""
    decls, non = declarations_of(card)
    body = {
        "declarations": msgspec.to_builtins(decls),
        "non_capabilities": non,
        "model_version": card.model_version,
    }
    return "sha256:" + hashlib.sha256(canonical.encode(body)).hexdigest()
