"""How a request's body is framed, read from its ASGI scope as the HTTP parser reads it.

Shared by the places that bound or charge a body before reading it (:mod:`trustscore.api.body_allowance`,
:mod:`trustscore.api.mount_bodies`). :mod:`trustscore.api.fast_append` reads the length itself, on
purpose more strictly: anything unusual there goes on to Litestar.
"""

from __future__ import annotations

from litestar.types import Scope

from trustscore.errors import InvalidInput


def declared_length(scope: Scope) -> int | None:
    """The body length ``scope`` declares (Content-Length, read as the HTTP parser reads it: blanks around
    it and leading zeros allowed; one of more than 20 digits, which the parser refuses, as 2^64), None
    when none: the body comes chunked. :class:`~trustscore.errors.InvalidInput` for one that is not a
    number (the parser refuses it first; an app called directly does not)."""
    for name, value in scope["headers"]:
        if name == b"content-length":
            digits = value.strip(b" \t").lstrip(b"0") or b"0"
            if not digits.isdigit():  # (ASCII digits only, for bytes)
                raise InvalidInput("Content-Length must be a decimal number of bytes")
            # (20 digits keep int() from reading a long one: past them it is more than any limit)
            return int(digits) if len(digits) <= 20 else 1 << 64
    return None
