"""Strict query strings: each parameter at most once, never empty.

No route takes a list in its query, and Litestar quietly keeps one of ``?start=1&start=9`` and reads
``?end=`` as if ``end`` were absent; a client that sends either meant something the server would not do,
so it is told (400) instead of being answered about another request (found by the schema fuzzer).
"""

from __future__ import annotations

from typing import Any

from litestar import Request

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
