"""in-toto Statement v1 and the registry of trustscore statement kinds.

A kind is a typed predicate struct plus a check that returns the facts the log needs (who must sign it,
whom it is about, its nonce). Adding a kind is one struct, one check function and one :func:`register`.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar
from urllib.parse import SplitResult, urlsplit

import msgspec

from trustscore import canonical
from trustscore.errors import TOO_DEEP, InvalidInput, UnsupportedKind

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_PREFIX = "https://trustscore.dev/predicates/"
NONCE_MIN, NONCE_MAX = 16, 128


class Subject(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    name: str
    digest: dict[str, str]


class Statement(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    type: str = msgspec.field(name="_type")
    subject: list[Subject] = msgspec.field(default_factory=list)
    predicateType: str = ""
    predicate: msgspec.Raw = msgspec.Raw(b"null")


class Predicate(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    """Fields every trustscore predicate carries."""

    nonce: str
    issued_at: str


P = TypeVar("P", bound=Predicate)


@dataclass(frozen=True)
class Facts:
    """What the log needs to know about a statement, derived from it by its kind's check."""

    signer: str  # the key id that must have signed it
    subject: str  # the id the statement is about
    introduces_key: bytes | None = None  # a public key this statement registers (cards)
    cosigners: tuple[tuple[str, bytes], ...] = ()  # (id, key) pairs that must also sign (controllers)


@dataclass(frozen=True)
class Kind(Generic[P]):
    name: str
    version: int
    struct: type[P]
    check: Callable[[Statement, P], Facts]

    @property
    def predicate_type(self) -> str:
        return f"{PREDICATE_PREFIX}{self.name}/v{self.version}"


_REGISTRY: dict[str, Kind[Any]] = {}


def register(kind: Kind[P]) -> Kind[P]:
    if kind.predicate_type in _REGISTRY:
        raise ValueError(f"statement kind {kind.predicate_type} registered twice")
    _REGISTRY[kind.predicate_type] = kind
    return kind


def kinds() -> dict[str, Kind[Any]]:
    return dict(_REGISTRY)


@dataclass(frozen=True)
class ParsedStatement:
    statement: Statement
    kind: Kind[Any]
    predicate: Predicate
    facts: Facts


_statement_decoder = msgspec.json.Decoder(Statement)


def parse_statement(payload: bytes) -> ParsedStatement:
    """Decode and semantically check a statement's bytes; raise naming what is wrong."""
    try:
        stmt = _statement_decoder.decode(payload)
    except msgspec.DecodeError as exc:
        raise InvalidInput(f"payload is not an in-toto statement: {exc}") from exc
    except RecursionError as exc:
        raise InvalidInput(f"payload: {TOO_DEEP}") from exc
    if stmt.type != STATEMENT_TYPE:
        raise UnsupportedKind(f"statement _type must be {STATEMENT_TYPE!r}, got {stmt.type!r}")
    kind = _REGISTRY.get(stmt.predicateType)
    if kind is None:
        raise UnsupportedKind(f"unknown predicateType {stmt.predicateType!r}")
    if not stmt.subject:
        raise InvalidInput("statement has no subject")
    try:
        predicate = msgspec.json.decode(stmt.predicate, type=kind.struct)
    except msgspec.DecodeError as exc:
        raise InvalidInput(f"invalid {kind.name} predicate: {exc}") from exc
    except RecursionError as exc:
        raise InvalidInput(f"{kind.name} predicate: {TOO_DEEP}") from exc
    _check_common(predicate)
    return ParsedStatement(stmt, kind, predicate, kind.check(stmt, predicate))


def _check_common(p: Predicate) -> None:
    if not (NONCE_MIN <= len(p.nonce) <= NONCE_MAX) or not p.nonce.isascii() or not p.nonce.isprintable():
        raise InvalidInput(f"nonce must be {NONCE_MIN}..{NONCE_MAX} printable ASCII characters")
    parse_time(p.issued_at, what="issued_at")


def parse_time(text: str, *, what: str) -> dt.datetime:
    """An RFC 3339 UTC timestamp ending in Z, as an aware datetime.

    Lenient as it always was, since entries already logged are parsed with it: ``fromisoformat`` also
    takes other ISO 8601 forms, and a date alone (``2025-01-01Z``) is read as its midnight UTC (it gave a
    naive datetime, and every comparison with it failed). What a submitter may send from now on is
    :func:`check_time_text`'s form, checked at intake."""
    if not text.endswith("Z"):
        raise InvalidInput(f"{what} must be an RFC 3339 UTC time ending in Z")
    try:
        at = dt.datetime.fromisoformat(text[:-1] + "+00:00")
    except ValueError as exc:
        raise InvalidInput(f"{what} is not an RFC 3339 time") from exc
    return at if at.tzinfo is not None else at.replace(tzinfo=dt.UTC)


#: The one form of time a new statement may carry: RFC 3339's date-time in UTC, with a ``T``, seconds
#: and up to 6 fractional digits (``format_time`` writes 6).
RFC3339_UTC = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?Z")


def check_time_text(text: str, *, what: str) -> dt.datetime:
    """A time in a statement submitted now: :data:`RFC3339_UTC`'s form, parsed (intake only)."""
    if not RFC3339_UTC.fullmatch(text):
        raise InvalidInput(
            f"{what} must be an RFC 3339 UTC time like 2026-01-31T12:00:00Z, got {text[:40]!r}"
        )
    return parse_time(text, what=what)


#: The earliest time a submitter may claim for its statement or its evidence (the Unix epoch): no agent's
#: evidence is older, and trustscore-v3's anchored decay refuses evidence times more than 960 half-lives
#: (about 79 years) before its anchor (docs/methodology.md, "trustscore-v3").
EARLIEST_CLAIMED = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def check_claimed_time(text: str, *, what: str, latest: dt.datetime) -> dt.datetime:
    """A time a submitter claims, parsed; refused before :data:`EARLIEST_CLAIMED` and after ``latest``
    (the server's clock plus the allowed skew: evidence dated in the future would escape decay)."""
    at = check_time_text(text, what=what)
    if at > latest:
        raise InvalidInput(f"{what} {text} is in the future")
    if at < EARLIEST_CLAIMED:
        raise InvalidInput(f"{what} {text} is before {format_time(EARLIEST_CLAIMED)}")
    return at


def format_time(t: dt.datetime) -> str:
    return t.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def make_statement(kind: Kind[P], subject: Subject, predicate: P) -> bytes:
    """Canonical statement bytes for a new statement of ``kind``."""
    return canonical.encode(
        {
            "_type": STATEMENT_TYPE,
            "subject": [subject],
            "predicateType": kind.predicate_type,
            "predicate": predicate,
        }
    )


def check_url(url: str, *, what: str) -> SplitResult:
    """An http(s) URL with a host, at most 2048 characters; its parts."""
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError as exc:  # an unclosed IPv6 bracket, say
        raise InvalidInput(f"{what} must be an http(s) URL: {exc}") from None
    if parts.scheme not in ("http", "https") or not host or len(url) > 2048:
        raise InvalidInput(f"{what} must be an http(s) URL")
    return parts


def check_new_url(url: str, *, what: str) -> None:
    """An http(s) URL in a statement submitted now (intake only: entries already logged keep the rule
    they were admitted by, :func:`check_url`): printable ASCII without spaces, no user or password, a port
    in range."""
    parts = check_url(url, what=what)
    if not url.isascii() or not url.isprintable() or " " in url:
        raise InvalidInput(f"{what} must be printable ASCII without spaces")
    if parts.username is not None or parts.password is not None:
        raise InvalidInput(f"{what} must not carry a user or password")
    try:
        port = parts.port  # raises for a port out of range
    except ValueError as exc:
        raise InvalidInput(f"{what}: {exc}") from None
    if port == 0:
        raise InvalidInput(f"{what}: port 0 is out of range")


#: Kinds whose ``endpoint`` an agent declares (its cards). Other kinds carrying an endpoint (a
#: re-verification, a scope run) copy one from a card already logged, which may predate
#: :func:`check_new_url`: refusing them would leave such an agent's runs unrecordable (found by review).
DECLARED_ENDPOINT_KINDS = frozenset({"agent-card"})


def check_new(stmt: ParsedStatement, payload: bytes) -> None:
    """Rules for statements submitted from now on, checked at intake only (a log already written is
    replayed under the rules its entries were admitted by): no key repeated in an object of ``payload``
    (:func:`check_unique_keys`), the statement's ``issued_at`` (and a report's ``started_at``) in
    :data:`RFC3339_UTC`'s form, and an endpoint a card declares a clean URL (:func:`check_new_url`)."""
    check_unique_keys(payload)
    predicate = stmt.predicate
    check_time_text(predicate.issued_at, what="issued_at")
    started_at = getattr(predicate, "started_at", None)  # reports and sitting reports: read by no formula
    if isinstance(started_at, str):
        check_time_text(started_at, what="started_at")
    endpoint = getattr(predicate, "endpoint", None)
    if isinstance(endpoint, str) and stmt.kind.name in DECLARED_ENDPOINT_KINDS:
        check_new_url(endpoint.removeprefix("a2a:"), what="endpoint")


_any_decoder = msgspec.json.Decoder()
_compact_encoder = msgspec.json.Encoder()


def check_unique_keys(payload: bytes) -> None:
    """Refuse a statement whose JSON repeats a key in one object (``"\\u0061"`` and ``"a"`` are one key).
    RFC 8259 leaves the value of a repeated key to the parser: this server's keeps the last, a verifier's
    may keep the first, and the signed bytes would then say one thing to the bureau and another to whoever
    recomputes a rating from the log.

    Fast path: a payload its own compact re-encoding reproduces byte for byte holds each key once, and
    every statement the SDK makes is such (canonical JSON). Any other layout is read key by key."""
    try:
        if _compact_encoder.encode(_any_decoder.decode(payload)) == payload:
            return
        json.loads(payload.decode("utf-8"), object_pairs_hook=_no_repeated_key)
    except RecursionError as exc:
        raise InvalidInput(f"payload: {TOO_DEEP}") from exc
    except (msgspec.DecodeError, ValueError) as exc:  # UnicodeDecodeError and JSONDecodeError included
        raise InvalidInput(f"payload is not JSON: {exc}") from exc


def _no_repeated_key(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):  # InvalidInput is no ValueError: json.loads lets it through as it is
        seen: set[str] = set()
        for name, _ in pairs:
            if name in seen:
                raise InvalidInput(f"payload repeats the key {name[:100]!r} in one object")
            seen.add(name)
    return obj


def check_endpoint(url: str, *, what: str) -> None:
    """An agent endpoint: an http(s) URL answering the plain HTTP agent API, or ``a2a:`` and the http(s)
    base URL of an A2A agent (docs/integrations.md)."""
    check_url(url.removeprefix("a2a:"), what=what)


def check_text(text: str, *, what: str, max_len: int = 200) -> None:
    if not text.strip() or len(text) > max_len or not text.isprintable():
        raise InvalidInput(f"{what} must be 1..{max_len} printable characters")
