"""A small HTTP client for the trustscore API, used by the CLI and the SDK.

It turns problem+json responses into :class:`~trustscore.errors.TrustscoreError`s carrying the server's
``detail``, and network failures into one-line errors. Nothing it returns is trusted: callers verify.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import msgspec

from trustscore.canonical import b64decode
from trustscore.errors import InvalidInput, NotFound, StorageError, TrustscoreError

#: Times the outcome stats are paged from the start when the first page's tally is gone (409) meanwhile,
#: and the groups gathered at most (a server whose pages do not end is refused past it).
STATS_ATTEMPTS = 5
MAX_STATS_GROUPS = 1_000_000


class RemoteError(TrustscoreError):
    """The server refused a request; ``status`` and ``problem`` are what it said."""

    code = "remote"
    title = "Server refused the request"

    def __init__(self, message: str, *, status: int, problem: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.http_status = status
        self.problem = problem or {}


def printable(text: str) -> str:
    """``text`` with line breaks and other control characters escaped (``\\n``, ``\\x1b``): what a server
    says is printed on the command's one error line, where a line break forged another line and an
    escape sequence reached the terminal (review)."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


#: Bytes of one answer the client reads (a rating attestation's bundle, the largest, is at most 32 MiB).
MAX_ANSWER = 64 << 20


class LogClient:
    def __init__(
        self, server: str, *, timeout: float = 30.0, transport: httpx.BaseTransport | None = None
    ) -> None:
        if not server.startswith(("http://", "https://")):
            raise InvalidInput(f"server must be an http(s) URL, got {server!r}")
        self.server = server.rstrip("/")
        try:
            self._http = httpx.Client(base_url=self.server, timeout=timeout, transport=transport)
        except httpx.InvalidURL as exc:
            raise InvalidInput(f"server {server!r} is not a URL: {exc}") from None

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> LogClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _request(self, method: str, path: str, **kw: Any) -> httpx.Response:
        if kw.get("params"):  # an absent parameter is left out, not sent empty (the server refuses ``?x=``)
            kw["params"] = {k: v for k, v in kw["params"].items() if v is not None}
        try:
            r = self._bounded(method, path, **kw)
        except httpx.HTTPError as exc:
            raise StorageError(f"cannot reach {self.server}: {exc}") from exc
        if r.status_code >= 400:
            problem: dict[str, Any] | None = None
            detail = r.text.strip()[:500]
            if r.headers.get("content-type", "").startswith("application/problem+json"):
                try:
                    parsed = r.json()
                except (ValueError, RecursionError):
                    parsed = None
                if isinstance(parsed, dict):  # (a problem of another shape keeps the body's text)
                    problem = parsed
                    detail = str(problem.get("detail") or problem.get("title") or detail)[:500]
            detail = printable(detail)  # a server's words, printed on one line to a terminal
            if r.status_code == 404:
                raise NotFound(f"{self.server}{path}: {detail}")
            raise RemoteError(
                f"server refused ({r.status_code}): {detail}", status=r.status_code, problem=problem
            )
        return r

    def _bounded(self, method: str, path: str, **kw: Any) -> httpx.Response:
        """The answer, read (decoded) to at most :data:`MAX_ANSWER` bytes: a server answering without end
        (a 16 GiB body declared) took a command to 585 MB before the connection dropped (review)."""
        with self._http.stream(method, path, **kw) as streamed:
            body = bytearray()
            for chunk in streamed.iter_bytes():
                body += chunk
                if len(body) > MAX_ANSWER:
                    raise InvalidInput(f"{self.server}{path} answered more than {MAX_ANSWER} bytes")
            headers = [(k, v) for k, v in streamed.headers.multi_items() if k.lower() != "content-encoding"]
            return httpx.Response(
                streamed.status_code, headers=headers, content=bytes(body), request=streamed.request
            )

    def _json(self, method: str, path: str, **kw: Any) -> Any:
        r = self._request(method, path, **kw)
        try:
            return r.json()
        except (ValueError, RecursionError) as exc:  # (nested deeper than the parser goes)
            raise InvalidInput(f"{self.server}{path} did not return JSON this client can read") from exc

    def submit(self, envelopes: Any) -> list[dict[str, Any]]:
        """POST one envelope (a dict/struct) or a list of them; returns the entries' index and leaf hash."""
        body = msgspec.json.encode(envelopes)
        data = self._json(
            "POST", "/v1/log/entries", content=body, headers={"content-type": "application/json"}
        )
        entries: list[dict[str, Any]] = data["entries"]
        return entries

    def outcome_stats(self, group_by: str, floor: int | None = None) -> Any:
        """GET /v1/stats/outcomes (docs/evidence-ladder.md), every page: the groups of all pages in one
        answer, all of one log size (paging starts again when the server's tally moved meanwhile)."""
        params: dict[str, Any] = {"group_by": group_by}
        if floor is not None:
            params["floor"] = floor
        for _ in range(STATS_ATTEMPTS):
            answer = first = self._json("GET", "/v1/stats/outcomes", params=params)
            groups = list(first.get("groups", []))
            pinned = {**params, "log_size": first.get("log_size")}  # later pages from the first's tally
            try:
                while (after := answer.get("next")) is not None:
                    answer = self._json("GET", "/v1/stats/outcomes", params={**pinned, "after": after})
                    page, following = answer.get("groups", []), answer.get("next")
                    forward = bool(page) and page[0].get("group", "") > after
                    if not forward or (following is not None and following <= after):
                        raise TrustscoreError("the server's outcome-stats pages do not move forward")
                    if len(groups) + len(page) > MAX_STATS_GROUPS:
                        raise TrustscoreError(f"the outcome stats hold more than {MAX_STATS_GROUPS} groups")
                    groups += page
            except RemoteError as exc:
                if exc.http_status == 409:  # the first page's tally is gone: start again
                    continue
                raise
            return {**first, "groups": groups, "next": None}
        raise TrustscoreError(f"the outcome stats moved on while they were paged, {STATS_ATTEMPTS} times")

    def submit_work_record(self, envelope: Any) -> Any:
        """POST one signed work-record/v1 envelope to /v1/work-records."""
        return self._json("POST", "/v1/work-records", content=msgspec.json.encode(envelope))

    def checkpoint(self) -> str:
        return self._request("GET", "/v1/log/checkpoint").text

    def verifier_key(self) -> str:
        return self._request("GET", "/v1/log/key").text.strip()

    def entries(self, start: int, end: int) -> list[tuple[int, bytes]]:
        """Entries ``[start, end)`` as (index, leaf bytes), following pages."""
        return [entry for page in self.entry_pages(start, end) for entry in page]

    def entry_pages(self, start: int, end: int) -> Iterator[list[tuple[int, bytes]]]:
        """Entries ``[start, end)`` one server page at a time (memory bounded by a page)."""
        while start < end:
            data = self._json("GET", "/v1/log/entries", params={"start": start, "end": end})
            page = data["entries"]
            if not page:
                return
            out: list[tuple[int, bytes]] = []
            for e in page:
                index = int(e["index"])
                if index != start:  # a server must not repeat, skip or reorder entries
                    raise InvalidInput(f"{self.server} returned entry {index} where {start} was due")
                out.append((index, b64decode(e["leaf"], what="leaf")))
                start += 1
            yield out

    def inclusion_proof(self, index: int, size: int) -> list[bytes]:
        data = self._json("GET", "/v1/log/proof/inclusion", params={"index": index, "size": size})
        return [b64decode(h, what="proof hash") for h in data["proof"]]

    def consistency_proof(self, size1: int, size2: int) -> list[bytes]:
        data = self._json("GET", "/v1/log/proof/consistency", params={"from": size1, "to": size2})
        return [b64decode(h, what="proof hash") for h in data["proof"]]

    def key_index(self, key_id: str) -> int:
        """The index of the entry that registered ``key_id`` (to be fetched and verified by the caller)."""
        data = self._json("GET", f"/v1/log/keys/{key_id}")
        return int(data["index"])

    def get_json(self, path: str, params: dict[str, Any] | None = None) -> Any:
        """GET a JSON document of the public API (absent parameters left out); errors as in every call."""
        return self._json("GET", path, params=params or {})

    def post_json(self, path: str, body: Any) -> Any:
        """POST a struct or dict as JSON and return the JSON answer."""
        return self._json(
            "POST", path, content=msgspec.json.encode(body), headers={"content-type": "application/json"}
        )
