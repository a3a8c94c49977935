"""HTTP routes of the evidence log (see docs/ledger-format.md)."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from litestar import Controller, Request, get, post
from litestar.di import NamedDependency
from litestar.openapi.datastructures import ResponseSpec
from litestar.openapi.spec import Operation
from litestar.params import FromPath, QueryParameter
from litestar.response.base import ASGIResponse

from trustscore.api.addresses import client_address
from trustscore.api.openapi import (
    MAX_INDEX,
    READ_PROBLEMS,
    STARTING,
    WRITE_PROBLEMS,
    envelope_body,
    operation_class,
)
from trustscore.api.query import index_parameter, index_params
from trustscore.api.wiring import log_service
from trustscore.canonical import b64encode
from trustscore.services.log import LogService
from trustscore.settings import DEFAULT_MAX_BATCH
from trustscore.store.log import Appended


class AppendedEntry(msgspec.Struct):
    index: int
    leaf_hash: str
    duplicate: bool


class AppendResponse(msgspec.Struct):
    entries: list[AppendedEntry]


class LogEntry(msgspec.Struct):
    index: int
    leaf: str
    leaf_hash: str


class EntriesResponse(msgspec.Struct):
    entries: list[LogEntry]
    next: int | None


class InclusionProofResponse(msgspec.Struct):
    index: int
    size: int
    proof: list[str]


class ConsistencyProofResponse(msgspec.Struct):
    from_size: int = msgspec.field(name="from")
    to_size: int = msgspec.field(name="to")
    proof: list[str] = msgspec.field(default_factory=list)


class KeyResponse(msgspec.Struct):
    id: str
    public_key: str
    index: int


# Appending is the hottest write. Its handler takes only the request (no dependency or parameter
# resolution, which Litestar would run per request) and answers with bytes msgspec encoded, the same
# JSON Litestar would send; the OpenAPI description of its 201 is given by hand instead.
_json = msgspec.json.Encoder()
JSON_HEADERS = {"content-type": "application/json"}


def json_response(body: msgspec.Struct, status: int = 200) -> ASGIResponse:
    return ASGIResponse(body=_json.encode(body), status_code=status, headers=JSON_HEADERS)


def appended_response(appended: list[Appended]) -> ASGIResponse:
    """The answer to an append: each statement's index, 201 when anything new was written, else 200."""
    body = AppendResponse([AppendedEntry(a.index, b64encode(a.leaf_hash), a.duplicate) for a in appended])
    return json_response(body, 200 if all(a.duplicate for a in appended) else 201)


def _index_query(*params: tuple[str, str]) -> type[Operation]:
    """The OpenAPI operation of a route reading the index parameters ``(name, description)`` by hand."""
    return operation_class(parameters=[index_parameter(name, what) for name, what in params])


NonNegative = Annotated[int, QueryParameter(ge=0, le=MAX_INDEX)]
Log = NamedDependency[LogService]
MaxPage = NamedDependency[int]
MaxPageBytes = NamedDependency[int]
TEXT = "text/plain"  # Litestar adds "; charset=utf-8" (given here too, it came twice: found by fuzzing)


class LogController(Controller):
    path = "/v1/log"
    tags = ["log"]  # noqa: RUF012 - Litestar class attribute

    @post(
        "/entries",
        operation_id="appendEntries",
        status_code=201,
        operation_class=envelope_body(
            "an agent-card/v1 or /v2 or party-card/v1 statement, or an array of them (all or nothing)",
            batch=DEFAULT_MAX_BATCH,
        ),
        responses={
            200: ResponseSpec(AppendResponse, description="every statement was already in the log"),
            201: ResponseSpec(
                AppendResponse, description="something new was written (each statement's index)"
            ),
            **WRITE_PROBLEMS,
        },
    )
    async def append(self, request: Request[Any, Any, Any]) -> ASGIResponse:
        """Append one DSSE envelope, or a JSON array of envelopes, to the log (all or nothing).

        Each envelope's signatures are verified; a statement already in the log returns its first index
        with ``duplicate: true``. Returns 201 when anything new was written, else 200.
        """
        service = log_service(request.app.state)
        return appended_response(await service.submit(await request.body(), client_address(request)))

    @get(
        "/checkpoint",
        operation_id="getCheckpoint",
        media_type=TEXT,
        cache_control=None,
        responses=READ_PROBLEMS,
    )
    async def checkpoint(self, log_service: Log) -> str:
        """The latest checkpoint: a C2SP tlog-checkpoint signed as a C2SP signed note."""
        return (await log_service.latest_checkpoint()).signed_note

    @get("/key", operation_id="getLogKey", media_type=TEXT, responses=STARTING)
    async def key(self, log_service: Log) -> str:
        """The log's verifier key in the Go ``note`` verifier-key text form."""
        return log_service.verifier_key + "\n"

    @get(
        "/entries",
        operation_id="getEntries",
        responses=READ_PROBLEMS,
        description=(
            "Entries [start, end) with their exact leaf bytes (base64), a page at a time: at most "
            "TRUSTSCORE_MAX_PAGE entries (1000), and no entry past the first once the page's leaves hold "
            "TRUSTSCORE_MAX_PAGE_BYTES (4 MiB). A page cut short names the next start in `next`; follow it "
            "(or the last index + 1), never assume a page's length."
        ),
    )
    async def entries(
        self,
        log_service: Log,
        max_page: MaxPage,
        max_page_bytes: MaxPageBytes,
        start: NonNegative = 0,
        # An int, not ``int | None``: Litestar reads ``?end=null`` as None (found by the fuzzer).
        end: Annotated[int, QueryParameter(ge=0, le=MAX_INDEX)] = MAX_INDEX,
    ) -> EntriesResponse:
        """Entries ``[start, end)`` with their exact leaf bytes (base64), at most one page at a time (a
        number of entries, and of leaf bytes: at least one entry); without ``end``, up to the end of the
        log. A page cut short says where the next starts."""
        rows = await log_service.entries(start, None if end == MAX_INDEX else end, max_page, max_page_bytes)
        full = len(rows) == max_page or sum(len(r.leaf) for r in rows) >= max_page_bytes
        nxt = rows[-1].index + 1 if rows and full and rows[-1].index + 1 < end else None
        return EntriesResponse(
            [LogEntry(r.index, b64encode(r.leaf), b64encode(r.leaf_hash)) for r in rows], nxt
        )

    # The proofs are the hottest reads: like appending, they read their query by hand and answer with
    # bytes msgspec encoded (no per-request dependency or parameter resolution).
    @get(
        "/proof/inclusion",
        operation_id="getInclusionProof",
        operation_class=_index_query(
            ("index", "the entry's index"), ("size", "the tree size (a checkpoint's)")
        ),
        responses={200: ResponseSpec(InclusionProofResponse, description="the proof"), **READ_PROBLEMS},
    )
    async def inclusion(self, request: Request[Any, Any, Any]) -> ASGIResponse:
        """The RFC 6962 inclusion proof of entry ``index`` in the tree of ``size`` entries."""
        index, size = index_params(request, "index", "size")
        proof = await log_service(request.app.state).inclusion_proof(index, size)
        return json_response(InclusionProofResponse(index, size, [b64encode(h) for h in proof]))

    @get(
        "/proof/consistency",
        operation_id="getConsistencyProof",
        operation_class=_index_query(("from", "the smaller tree size"), ("to", "the larger tree size")),
        responses={200: ResponseSpec(ConsistencyProofResponse, description="the proof"), **READ_PROBLEMS},
    )
    async def consistency(self, request: Request[Any, Any, Any]) -> ASGIResponse:
        """The RFC 6962 consistency proof between the trees of sizes ``from`` and ``to``."""
        old, new = index_params(request, "from", "to")
        proof = await log_service(request.app.state).consistency_proof(old, new)
        return json_response(ConsistencyProofResponse(old, new, [b64encode(h) for h in proof]))

    @get("/keys/{key_id:str}", operation_id="getKey", responses=READ_PROBLEMS)
    async def key_entry(self, log_service: Log, key_id: FromPath[str]) -> KeyResponse:
        """A registered signer's public key and the index of the entry that registered it (prove it!)."""
        public, index = await log_service.key_entry(key_id)
        return KeyResponse(key_id, b64encode(public), index)
