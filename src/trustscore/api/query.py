"""Strict query strings and integer parameters: each query parameter at most once, never empty, and an
integer in the path or the query written in its one decimal form.

No route takes a list in its query, and Litestar quietly keeps one of ``?start=1&start=9`` and reads
``?end=`` as if ``end`` were absent; a client that sends either meant something the server would not do,
so it is told (400) instead of being answered about another request (found by the schema fuzzer).
Litestar also reads ``?start=1e0``, ``1.0`` and ``0.99999999999999999`` as 1, and Python's ``int`` reads
a path's ``0_5``, ``+5``, `` 5`` and Arabic-Indic digits as 5: one resource under many names, which caches
keep apart (found by fuzzing). Those are 400s too.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated, Any

import msgspec
from litestar import Request
from litestar.handlers import HTTPRouteHandler
from litestar.openapi.spec import OpenAPIType, Parameter, Schema
from litestar.params import ParameterKwarg

from trustscore.api.openapi import MAX_INDEX
from trustscore.errors import InvalidInput
from trustscore.kinds.parties import check_key_id

_OPT_PREFIX = "trustscore.query."

#: Path parameters that name a key (an agent, a party or a service key): ``ts1_`` and 40 lowercase hex.
KEY_ID_PARAMS = frozenset({"agent_id", "key_id"})

#: An integer's one form: no sign but a minus, no leading zero, no separator, ASCII digits only.
DECIMAL = re.compile(r"0|-?[1-9][0-9]*")


def check_query(request: Request[Any, Any, Any]) -> None:
    """Raise :class:`InvalidInput` if a query parameter is repeated or empty, or an integer parameter of
    the path or the query is not in its one form (:data:`DECIMAL`)."""
    params = request.scope.get("path_params") or {}
    for name in KEY_ID_PARAMS.intersection(params):
        # The schema's pattern: a malformed id was a 404 echoing it in full (a 3,000-character id came
        # back twice), where the badge route already said 400 (found by fuzzing).
        check_key_id(params[name], what=name.replace("_", " "))
    template = request.scope.get("path_template", "")  # the matched route's, e.g. /v1/sittings/{index}
    if "{" in template and (integers := _integer_path_names(request.route_handler)):
        _check_path_integers(template, request.scope["path"], integers)
    if not request.scope.get("query_string"):
        return  # nothing to parse (most requests, and every write)
    integers = _integer_query_names(request.route_handler)
    for name, values in request.query_params.dict().items():
        if len(values) > 1:
            raise InvalidInput(f"query parameter {name!r} is given more than once")
        if values == [""]:
            raise InvalidInput(f"query parameter {name!r} is empty")
        if name in integers and not DECIMAL.fullmatch(values[0]):
            raise InvalidInput(f"query parameter {name!r} must be an integer in decimal digits")


def _check_path_integers(template: str, path: str, integers: frozenset[str]) -> None:
    for pattern, segment in zip(template.split("/"), path.split("/"), strict=False):
        if pattern[1:-1] in integers and not DECIMAL.fullmatch(segment):
            raise InvalidInput(f"path parameter {pattern[1:-1]!r} must be an integer in decimal digits")


def _path_parameters(handler: HTTPRouteHandler) -> list[tuple[str, str]]:
    """(name, type) of each parameter in ``handler``'s path templates (``{index:int}``)."""
    found = (p.partition(":") for path in handler.paths for p in re.findall(r"{([^}]+)}", path))
    return [(name, kind) for name, _, kind in found]


def _integer_path_names(handler: HTTPRouteHandler) -> frozenset[str]:
    return _kept(handler, "integer_path_names", _find_integer_path_names)


def _integer_query_names(handler: HTTPRouteHandler) -> frozenset[str]:
    return _kept(handler, "integer_query_names", _find_integer_query_names)


def _kept(
    handler: HTTPRouteHandler, key: str, find: Callable[[HTTPRouteHandler], frozenset[str]]
) -> frozenset[str]:
    """``find(handler)``, worked out at its first request and kept in the handler's ``opt`` (a cache
    keyed by handler kept every app of a test session alive: 2.7 MB each, found by review)."""
    kept = handler.opt.get(_OPT_PREFIX + key)
    if kept is None:
        kept = handler.opt[_OPT_PREFIX + key] = find(handler)
    return kept


def _find_integer_path_names(handler: HTTPRouteHandler) -> frozenset[str]:
    return frozenset(name for name, kind in _path_parameters(handler) if kind == "int")


def _find_integer_query_names(handler: HTTPRouteHandler) -> frozenset[str]:
    """The query names of ``handler``'s integer parameters."""
    in_path = {name for name, _ in _path_parameters(handler)}
    names = set()
    for name, field in handler.parsed_fn_signature.parameters.items():
        if name in in_path:
            continue
        types = field.inner_types if field.is_union else (field,)
        if any(t.is_subclass_of(int) and not t.is_subclass_of(bool) for t in types):
            kwarg = field.kwarg_definition
            # QueryParameter(name="from") sets name, Parameter(query="from") query (found by review)
            alias = (kwarg.query or kwarg.name) if isinstance(kwarg, ParameterKwarg) else None
            names.add(alias or name)
    return frozenset(names)


Index = Annotated[int, msgspec.Meta(ge=0, le=MAX_INDEX)]


def index_params(request: Request[Any, Any, Any], *names: str) -> tuple[int, ...]:
    """The required log index or size query parameters ``names`` of a handler that reads its query by
    hand (the proof routes: no per-request parameter resolution), in their one decimal form
    (:data:`DECIMAL`) and bounded, each message naming the parameter."""
    params = request.query_params
    out = []
    for name in names:
        value = params.get(name)
        if value is None:
            raise InvalidInput(f"Missing required query parameter {name!r}")
        if not DECIMAL.fullmatch(value):
            raise InvalidInput(f"query parameter {name!r} must be an integer in decimal digits")
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
