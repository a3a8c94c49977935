"""Two request headers read by more than one route: ``If-None-Match`` (RFC 9110 13.1.2) and whether the
client accepts gzip (``Accept-Encoding``, RFC 9110 12.5.3, with its q-values)."""

from __future__ import annotations


def etag_matches(if_none_match: str, etag: str) -> bool:
    """Whether ``If-None-Match`` names ``etag`` (a strong ETag, quoted): ``*``, or one entry of the list,
    compared weakly (``W/"x"`` matches ``"x"``) as RFC 9110 asks for this header."""
    if if_none_match.strip() == "*":
        return True
    return any(tag.strip().removeprefix("W/") == etag for tag in if_none_match.split(","))


def accepts_gzip(accept_encoding: str) -> bool:
    """Whether ``Accept-Encoding`` allows gzip: listed (or ``*``) with a q-value above 0."""
    allowed: dict[str, bool] = {}
    for item in accept_encoding.split(","):
        coding, _, params = item.strip().partition(";")
        q = 1.0
        for param in params.split(";"):
            name, _, value = param.strip().partition("=")
            if name.strip().lower() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        if coding.strip():
            allowed[coding.strip().lower()] = q > 0
    if "gzip" in allowed:
        return allowed["gzip"]
    return allowed.get("x-gzip", allowed.get("*", False))
