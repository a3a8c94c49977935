"""Submit a signed exam report to a trustscore log server."""

from __future__ import annotations

from typing import Any

import httpx
import msgspec

from trustscore.errors import InvalidInput, StorageError, TrustscoreError
from trustscore.ledger import dsse

# Reports go to their own route: the server re-grades them and logs its graded evidence beside them.
SUBMIT_PATH = "/v1/reports"


class SubmitRejected(TrustscoreError):
    """The server refused the report; the message is the server's problem ``detail``."""

    code = "submit-rejected"
    status = 502
    title = "Server rejected the report"


def submit(envelope: dsse.Envelope, server: str, *, client: httpx.Client | None = None) -> dict[str, Any]:
    """POST a signed report to ``server``; return the server's own grading: ``report_index``,
    ``evidence_index`` (its signed graded evidence) and ``items`` (each item's server grade)."""
    if not server.startswith(("http://", "https://")):
        raise InvalidInput(f"server must be an http(s) URL, got {server!r}")
    url = server.rstrip("/") + SUBMIT_PATH
    body = msgspec.json.encode(envelope)
    own = client is None
    http = client or httpx.Client(timeout=30)
    try:
        resp = http.post(url, content=body, headers={"Content-Type": "application/json"})
    except httpx.HTTPError as exc:
        raise StorageError(f"cannot reach {url}: {exc}") from exc
    finally:
        if own:
            http.close()
    try:
        data = resp.json()
    except ValueError:
        data = None
    if resp.status_code >= 400:
        detail = data.get("detail") if isinstance(data, dict) else None
        raise SubmitRejected(f"{url} answered {resp.status_code}: {detail or resp.reason_phrase}")
    if not isinstance(data, dict) or not isinstance(data.get("items"), list):
        raise SubmitRejected(f"{url} answered {resp.status_code} without the server's grades")
    return data
