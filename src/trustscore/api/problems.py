"""RFC 9457 problem+json: the one place errors become HTTP responses."""

from __future__ import annotations

import logging
from typing import Any

from litestar import Request, Response
from litestar.exceptions import HTTPException, ValidationException

from trustscore.errors import TOO_DEEP, Busy, TrustscoreError

PROBLEM_TYPE_BASE = "https://trustscore.dev/problems/"
MEDIA_TYPE = "application/problem+json"

MAX_INSTANCE = 1024  # characters of the request path a problem names as its instance
MAX_DETAIL = 1024  # characters of a problem's detail; a longer one keeps its two ends (see shortened)

log = logging.getLogger(__name__)


def _instance(request: Request[Any, Any, Any]) -> str:
    """The request's path for a problem's ``instance``: ``request.url`` parses the Host header, and a
    malformed one (``Host: x:1.``) made every error a 500 (found by review)."""
    try:
        path = request.url.path
    except ValueError:
        path = str(request.scope.get("root_path", "")) + str(request.scope.get("path", ""))
    return path if len(path) <= MAX_INSTANCE else ""  # an error does not echo a long input in full


def shortened(detail: str) -> str:
    """``detail`` cut to :data:`MAX_DETAIL` characters if longer: an echoed input (``?model=`` of 5,000
    characters came back in full) gives way in the middle, so the start (what was wrong) and the end
    (usually what is accepted) both stay."""
    if len(detail) <= MAX_DETAIL:
        return detail
    head, tail = MAX_DETAIL * 2 // 3, MAX_DETAIL // 4
    return f"{detail[:head]}… ({len(detail) - head - tail} characters left out) …{detail[-tail:]}"


def problem_content(
    status: int, code: str, title: str, detail: str, instance: str, **extra: Any
) -> dict[str, Any]:
    """A problem+json body; ``instance`` left out when empty (RFC 9457 makes it optional), the detail
    :func:`shortened`."""
    return {
        "type": PROBLEM_TYPE_BASE + code,
        "title": title,
        "status": status,
        "detail": shortened(detail),
        **({"instance": instance} if instance else {}),
        **extra,
    }


def problem(status: int, code: str, title: str, detail: str, instance: str, **extra: Any) -> Response[Any]:
    """A problem+json response (:func:`problem_content`)."""
    content = problem_content(status, code, title, detail, instance, **extra)
    return Response(content=content, status_code=status, media_type=MEDIA_TYPE)


def error_problem(exc: Exception, instance: str) -> tuple[dict[str, Any], dict[str, str]]:
    """The problem body and extra headers for an error a handler raised (any but Litestar's own
    ``HTTPException``): one answer for every route, the framework-free append included
    (:mod:`trustscore.api.fast_append`)."""
    if isinstance(exc, TrustscoreError):
        if isinstance(exc, Busy):  # overload the client is told to retry: anyone can cause it, often
            log.warning("%s: %s", exc.code, exc.message)
        elif exc.status >= 500:
            log.error("%s: %s", exc.code, exc.message)
        retry_after = exc.extra.get("retry_after")
        if retry_after is None:
            return problem_content(exc.status, exc.code, exc.title, exc.message, instance), {}
        # An extension member (RFC 9457 section 3.2) and the standard header say when to try again.
        content = problem_content(
            exc.status, exc.code, exc.title, exc.message, instance, retry_after=retry_after
        )
        return content, {"Retry-After": str(retry_after)}
    if isinstance(exc, RecursionError):  # a body nested beyond the JSON decoder's depth: a client error
        return problem_content(400, "invalid-input", "Invalid input", TOO_DEEP, instance), {}
    log.exception("unhandled error on %s", instance, exc_info=exc)
    return problem_content(500, "internal", "Internal error", "an unexpected error occurred", instance), {}


def _error(request: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
    content, headers = error_problem(exc, _instance(request))
    response = Response(content=content, status_code=content["status"], media_type=MEDIA_TYPE)
    response.headers.update(headers)
    return response


_CODES = {
    400: "invalid-input",
    401: "unauthorized",
    403: "forbidden",
    404: "not-found",
    405: "method-not-allowed",
    413: "payload-too-large",
    415: "unsupported-media-type",
    429: "rate-limited",
}


def _http_error(request: Request[Any, Any, Any], exc: HTTPException) -> Response[Any]:
    detail = exc.detail
    if isinstance(exc, ValidationException) and isinstance(exc.extra, list) and exc.extra:
        parts = [f"{e.get('key', '?')}: {e.get('message', '')}" for e in exc.extra if isinstance(e, dict)]
        detail = "; ".join(parts) or detail
    if exc.status_code == 413:
        detail = f"the request body is larger than this route accepts ({_body_limit(request)} bytes at most)"
    code = _CODES.get(exc.status_code, "http-error")
    title = code.replace("-", " ").capitalize()
    response = problem(exc.status_code, code, title, detail, _instance(request))
    if exc.headers:
        response.headers.update(exc.headers)
    return response


def _body_limit(request: Request[Any, Any, Any]) -> object:
    """The body limit in force, as Litestar resolves it (the route's own, else its owners', else the app's)."""
    handler = request.route_handler
    resolve = getattr(handler, "resolve_request_max_body_size", None)  # (HTTP handlers only)
    return resolve() if resolve is not None else getattr(request.app, "request_max_body_size", "?")


EXCEPTION_HANDLERS: dict[int | type[Exception], Any] = {
    TrustscoreError: _error,
    HTTPException: _http_error,
    RecursionError: _error,
    Exception: _error,
}
