"""OpenAPI descriptions the handlers' signatures cannot give.

The write routes read their bodies raw (signatures are verified over the exact bytes received, so no
framework decoding stands in between), and errors leave through the problem+json handlers rather than
the handlers' return types. This module describes both: the DSSE envelope a write route takes, and the
RFC 9457 problems any route may answer with.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import msgspec
import yaml
from litestar import Request, Router
from litestar.openapi.datastructures import ResponseSpec
from litestar.openapi.plugins import (
    JsonRenderPlugin,
    OpenAPIRenderPlugin,
    RapidocRenderPlugin,
    RedocRenderPlugin,
    StoplightRenderPlugin,
    SwaggerRenderPlugin,
    YamlRenderPlugin,
)
from litestar.openapi.spec import (
    OpenAPI,
    OpenAPIHeader,
    OpenAPIMediaType,
    OpenAPIType,
    Operation,
    Parameter,
    RequestBody,
    Schema,
)

from trustscore.api.problems import MEDIA_TYPE
from trustscore.kinds.graded import DIMENSIONS
from trustscore.ledger.dsse import IN_TOTO_PAYLOAD_TYPE, MAX_SIGNATURES
from trustscore.ledger.keys import ID_PATTERN
from trustscore.ledger.merkle import MAX_INDEX as MAX_INDEX
from trustscore.services.ratings import DEFAULT_MODEL, RELEASED_MODELS


class Problem(msgspec.Struct):
    """An RFC 9457 problem; ``type`` ends in the error's code (e.g. ``.../problems/nonce-replay``). A 429
    or 503 that knows when to retry also carries ``retry_after`` (seconds, like the Retry-After header).
    ``instance`` is the request's path, left out beyond 1,024 characters (an error does not echo it)."""

    type: str
    title: str
    status: int
    detail: str
    instance: str | msgspec.UnsetType = msgspec.UNSET
    retry_after: int | msgspec.UnsetType = msgspec.UNSET


KEY_ID_PATTERN = ID_PATTERN


SIGNATURE = Schema(
    type=OpenAPIType.OBJECT,
    required=["keyid", "sig"],
    properties={
        "keyid": Schema(
            type=OpenAPIType.STRING,
            pattern=KEY_ID_PATTERN,
            description="the signer's key id: ts1_ + the first 20 bytes of SHA-256(public key), hex",
        ),
        "sig": Schema(
            type=OpenAPIType.STRING,
            content_encoding="base64",
            description="base64 Ed25519 signature over DSSE v1 PAE(payloadType, payload bytes)",
        ),
    },
    additional_properties=False,
)

ENVELOPE = Schema(
    type=OpenAPIType.OBJECT,
    title="DSSE envelope",
    required=["payloadType", "payload", "signatures"],
    properties={
        "payloadType": Schema(type=OpenAPIType.STRING, const=IN_TOTO_PAYLOAD_TYPE),
        "payload": Schema(
            type=OpenAPIType.STRING,
            content_encoding="base64",
            description="base64 of an in-toto Statement v1 whose predicateType names the trustscore "
            "statement kind (docs/ledger-format.md); verified as received, never re-serialised",
        ),
        "signatures": Schema(type=OpenAPIType.ARRAY, items=SIGNATURE, min_items=1, max_items=MAX_SIGNATURES),
    },
    additional_properties=False,
    description="A signed statement (https://github.com/secure-systems-lab/dsse, protocol v1).",
)


def operation_class(
    *, body: RequestBody | None = None, parameters: Sequence[Parameter] = ()
) -> type[Operation]:
    """An operation class adding what a handler reading its request by hand does not declare: its
    request ``body`` and query ``parameters``."""

    @dataclass
    class Described(Operation):
        def __post_init__(self) -> None:
            if body is not None:
                self.request_body = body
            if parameters:
                self.parameters = [*(self.parameters or []), *parameters]

    return Described


def envelope_body(what: str, *, batch: int | None = None) -> type[Operation]:
    """An operation class whose request body is one envelope of ``what`` (or, with ``batch``, also a
    JSON array of 1..batch envelopes)."""
    schema = ENVELOPE
    if batch is not None:
        schema = Schema(
            one_of=[ENVELOPE, Schema(type=OpenAPIType.ARRAY, items=ENVELOPE, min_items=1, max_items=batch)]
        )
    return operation_class(
        body=RequestBody(
            content={"application/json": OpenAPIMediaType(schema=schema)}, description=what, required=True
        )
    )


def _problem(description: str) -> ResponseSpec:
    return ResponseSpec(
        data_container=Problem, description=description, media_type=MEDIA_TYPE, generate_examples=False
    )


#: What every write route may answer besides success.
WRITE_PROBLEMS: dict[int, ResponseSpec] = {
    400: _problem("malformed JSON, not an envelope, bad base64, an invalid statement"),
    404: _problem("no such sitting, agent or exam (yet)"),
    409: _problem("a nonce this signer already used (a replay); nothing was written"),
    413: _problem("the body is larger than the limit"),
    422: _problem("a signature that does not verify, an unknown signer or statement kind, a role rule"),
    429: _problem("over the per-address or per-key write limit (Retry-After says when)"),
    503: _problem("the service is starting, or grading is busy (Retry-After says when); retry"),
}

#: What a read of a later page of the outcome stats may answer besides READ_PROBLEMS.
STALE_PAGE: dict[int, ResponseSpec] = {
    409: _problem("the tally the first page came from is no longer kept: ask for the first page again"),
}

#: What a read of one resource may answer besides success.
READ_PROBLEMS: dict[int, ResponseSpec] = {
    400: _problem("an invalid query parameter"),
    404: _problem("no such agent, model, entry or checkpoint (yet)"),
    503: _problem("the service is starting or its database is unreachable; retry"),
}

#: What a rating attestation may answer besides success: its bundle is bounded and its makings share a
#: budget (services/attestations.py).
ATTESTATION_PROBLEMS: dict[int, ResponseSpec] = {
    **READ_PROBLEMS,
    422: _problem(
        "the rating is computed from more log entries than a bundle holds (20,000, or 32 MiB of JSON)"
    ),
    429: _problem("a bundle this client address asked for is being made (Retry-After says when)"),
    503: _problem(
        "the service is starting, its database is unreachable, or the bundles being made fill the "
        "server's budget (Retry-After says when); retry"
    ),
}

#: What a read of a collection (exams, methodology) may answer besides success.
STARTING: dict[int, ResponseSpec] = {503: READ_PROBLEMS[503]}


# --- The finished document ------------------------------------------------------------------------------
# Litestar derives parameters from the handlers' annotations but writes integer bounds as floats
# (``4.611686018427388e+18``), drops a lower bound of 0 on optional integers, and cannot express a pattern
# or an enumeration from ``QueryParameter``. Each parameter's schema is therefore written here, once, by
# name (every route spells a concept with the same name), and the document is finished after it is built.

_INDEX = Schema(type=OpenAPIType.INTEGER, minimum=0, maximum=MAX_INDEX)
_KEY_ID = Schema(type=OpenAPIType.STRING, pattern=KEY_ID_PATTERN)

#: The schema of every parameter, by name (``in`` does not matter: a name means one thing everywhere).
PARAMETER_SCHEMAS: dict[str, Schema] = {
    "agent_id": _KEY_ID,
    "key_id": _KEY_ID,
    "after": Schema(type=OpenAPIType.STRING, pattern=r"^[0-9]{1,18}\.[0-9]{1,9}$"),
    "model": Schema(type=OpenAPIType.STRING, enum=list(RELEASED_MODELS), default=DEFAULT_MODEL),
    "dimension": Schema(type=OpenAPIType.STRING, enum=list(DIMENSIONS)),
    "start": replace(_INDEX, default=0),
    "end": _INDEX,
    "index": _INDEX,
    "size": _INDEX,
    "from": _INDEX,
    "to": _INDEX,
    "limit": Schema(type=OpenAPIType.INTEGER, minimum=1, maximum=1000, default=100),
}

RETRY_AFTER = OpenAPIHeader(
    schema=Schema(type=OpenAPIType.INTEGER, minimum=1),
    description="seconds to wait before retrying (sent when the server knows)",
)


def _operations(document: OpenAPI) -> Iterator[Operation]:
    for item in (document.paths or {}).values():
        for op in (item.get, item.put, item.post, item.delete, item.patch):
            if op is not None:
                yield op


def _schemas(schema: object) -> Iterator[Schema]:
    """``schema`` and every schema nested in it."""
    if not isinstance(schema, Schema):
        return
    yield schema
    nested: list[object] = [schema.items, schema.additional_properties, schema.schema_not]
    nested += [*(schema.properties or {}).values(), *(schema.prefix_items or [])]
    nested += [*(schema.one_of or []), *(schema.any_of or []), *(schema.all_of or [])]
    for child in nested:
        yield from _schemas(child)


def _integral(value: float | None) -> int | float | None:
    return int(value) if isinstance(value, float) and value.is_integer() else value


def finish(document: OpenAPI, models: Sequence[str] = RELEASED_MODELS) -> OpenAPI:
    """Finish the generated ``document`` in place: every parameter's schema from
    :data:`PARAMETER_SCHEMAS` (``model``: one of the served ``models``), integer bounds written as
    integers, and the Retry-After header on every 429 and 503 (docs/service.md). Returns ``document``."""
    schemas = {**PARAMETER_SCHEMAS, "model": replace(PARAMETER_SCHEMAS["model"], enum=list(models))}
    components = (document.components.schemas or {}).values() if document.components else []
    bodies = [
        media.schema
        for op in _operations(document)
        for response in (op.responses or {}).values()
        for media in (getattr(response, "content", None) or {}).values()
    ]
    for op in _operations(document):
        for parameter in op.parameters or []:
            if isinstance(parameter, Parameter) and parameter.name in schemas:
                own = parameter.schema if isinstance(parameter.schema, Schema) else None
                description = parameter.description or (own.description if own else None)
                parameter.schema = replace(schemas[parameter.name], description=description)
            bodies.append(getattr(parameter, "schema", None))
        for code, response in (op.responses or {}).items():
            if code in ("429", "503") and hasattr(response, "headers"):
                response.headers = {**(response.headers or {}), "Retry-After": RETRY_AFTER}
    for root in [*components, *bodies]:
        for schema in _schemas(root):
            if schema.type == OpenAPIType.INTEGER:
                schema.minimum = _integral(schema.minimum)
                schema.maximum = _integral(schema.maximum)
    return document


class KeptRendering(OpenAPIRenderPlugin):
    """``inner``'s rendering of the document, made at the first request and kept: the document is finished
    when the app is made (:func:`finish`) and never changes, and a rendering reads nothing else of a
    request than the app's settings. Litestar renders again at every request, on the event loop: the YAML
    took 157-268 ms at each ``GET /schema/openapi.yaml`` (2026-12-06 audit), anyone's to ask for."""

    def __init__(self, inner: OpenAPIRenderPlugin) -> None:
        super().__init__(
            path=inner.paths, media_type=inner.media_type, favicon=inner.favicon, style=inner.style
        )
        self.inner = inner
        self._rendered: bytes | None = None

    def render(self, request: Request[Any, Any, Any], openapi_schema: dict[str, Any]) -> bytes:
        if self._rendered is None:
            self._rendered = self.inner.render(request, openapi_schema)
        return self._rendered

    def receive_router(self, router: Router) -> None:
        self.inner.receive_router(router)


class PortableYaml(YamlRenderPlugin):
    """The JSON document as YAML of plain types only. Litestar's ``yaml.dump`` wrote Python tuples as
    ``!!python/tuple`` nodes, which a YAML reader other than PyYAML's unsafe loader cannot read. Dumped
    by libyaml when PyYAML has it (the same text as the pure-Python dumper's, 64 ms against 358 ms)."""

    def render(self, request: Request[Any, Any, Any], openapi_schema: dict[str, Any]) -> bytes:
        document = msgspec.json.decode(self.render_json(request, openapi_schema))
        dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
        return yaml.dump(document, Dumper=dumper, sort_keys=False, allow_unicode=True).encode()


def renderings() -> list[OpenAPIRenderPlugin]:
    """What ``/schema`` serves (Litestar's defaults: ReDoc at the root, the JSON and YAML documents and
    the other viewers), each rendering kept."""
    return [
        KeptRendering(plugin)
        for plugin in (
            RedocRenderPlugin(),
            JsonRenderPlugin(),
            PortableYaml(),
            SwaggerRenderPlugin(),
            RapidocRenderPlugin(),
            StoplightRenderPlugin(),
        )
    ]
