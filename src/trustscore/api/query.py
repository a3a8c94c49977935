"""Strict query strings: each parameter at most once, never empty.

No route takes a list in its query, and Litestar quietly keeps one of ``?start=1&start=9`` and reads
``?end=`` as if ``end`` were absent; a client that sends either meant something the server would not do,
so it is told (400) instead of being answered about another request (found by the schema fuzzer).
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from litestar import Request
from litestar.openapi.spec import OpenAPIType, Parameter, Schema

from trustscore.api.openapi import MAX_INDEX
from trustscore.errors import InvalidInput


def check_query(request: Request[Any, Any, Any]) -> None:
    """Raise :class:`InvalidInput` if a query parameter is repeated or empty."""
    if not request.scope.get("query_string"):
        return  # nothing to parse (most requests, and every write)
    for name, values in request.query_params.dict().items():
        if len(values) > 1:
            raise InvalidInput(f"query parameter {name!r} is given more than once")
        if values == [""]:
            raise InvalidInput(f"query parameter {name!r} is empty")


Index = Annotated[int, msgspec.Meta(ge=0, le=MAX_INDEX)]


def index_params(request: Request[Any, Any, Any], *names: str) -> tuple[int, ...]:
    """The required log index or size query parameters ``names`` of a handler that reads its query by
    hand (the proof routes: no per-request parameter resolution), converted and bounded as Litestar
    would (msgspec, lax: ``5.0`` is 5, ``05`` is refused), each message naming the parameter."""
    params = request.query_params
    out = []
    for name in names:
        value = params.get(name)
        if value is None:
            raise InvalidInput(f"Missing required query parameter {name!r}")
        try:
            out.append(msgspec.convert(value, Index, strict=False))
        except msgspec.ValidationError as exc:
            raise InvalidInput(f"{name}: {exc}") from None
    return tuple(out)


def index_parameter(name: str, description: str) -> Parameter:
    """The OpenAPI description of a required query parameter :func:`index_params` reads."""
    return Parameter(
        name=name,
        param_in="query",
        required=True,
        description=description,
        schema=Schema(type=OpenAPIType.INTEGER, minimum=0, maximum=MAX_INDEX),
    )
