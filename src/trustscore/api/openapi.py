"""OpenAPI descriptions the handlers' signatures cannot give.

The write routes read their bodies raw (signatures are verified over the exact bytes received, so no
framework decoding stands in between), and errors leave through the problem+json handlers rather than
the handlers' return types. This module describes both: the DSSE envelope a write route takes, and the
RFC 9457 problems any route may answer with.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import msgspec
from litestar.openapi.datastructures import ResponseSpec
from litestar.openapi.spec import OpenAPIMediaType, OpenAPIType, Operation, Parameter, RequestBody, Schema

from trustscore.api.problems import MEDIA_TYPE
from trustscore.ledger.dsse import IN_TOTO_PAYLOAD_TYPE, MAX_SIGNATURES


class Problem(msgspec.Struct):
    """An RFC 9457 problem; ``type`` ends in the error's code (e.g. ``.../problems/nonce-replay``)."""

    type: str
    title: str
    status: int
    detail: str
    instance: str


SIGNATURE = Schema(
    type=OpenAPIType.OBJECT,
    required=["keyid", "sig"],
    properties={
        "keyid": Schema(
            type=OpenAPIType.STRING,
            pattern="^ts1_[0-9a-f]{40}$",
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
    409: _problem("a nonce this signer already used (a replay); nothing was written"),
    413: _problem("the body is larger than the limit"),
    422: _problem("a signature that does not verify, an unknown signer or statement kind, a role rule"),
    429: _problem("over the per-address or per-key write limit (Retry-After says when)"),
    503: _problem("the service is starting or busy; retry"),
}

#: What a read of one resource may answer besides success.
READ_PROBLEMS: dict[int, ResponseSpec] = {
    400: _problem("an invalid query parameter"),
    404: _problem("no such agent, model, entry or checkpoint (yet)"),
}
