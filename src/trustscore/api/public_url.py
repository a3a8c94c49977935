"""The URL readers reach the service at, for the absolute links some responses carry: the bureau's A2A
agent card, the badge Markdown on an agent's page, and the Atom feeds' self links.

They were built from each request's Host header, so a client naming another host got links to it, in
responses a shared cache keeps for everyone (``public, max-age``): behind nginx with
``proxy_set_header Host $host`` and its default cache key, which leaves the client's Host out, one request
poisons the page for all readers (found by fuzzing). With ``TRUSTSCORE_PUBLIC_URL`` set the links name it
whatever Host says; without, they still follow Host, and such a response says ``Vary: Host``.
"""

from __future__ import annotations

from typing import Any

from litestar import Request

from trustscore.errors import InvalidInput

STATE_KEY = "public_url"


def public_base(request: Request[Any, Any, Any]) -> tuple[str, dict[str, str]]:
    """The service's base URL (no trailing slash) and the headers a response built from it must carry."""
    configured = request.app.state.get(STATE_KEY)
    if configured:
        return str(configured), {}
    try:
        return str(request.base_url).rstrip("/"), {"Vary": "Host"}
    except ValueError as exc:  # request.base_url parses Host: "x:1." is no port
        raise InvalidInput("the Host header is not a host and port") from exc
