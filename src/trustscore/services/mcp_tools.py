"""The bureau as an MCP server (the official Python SDK, ``mcp``): an agent checks a counterparty before
hiring it without leaving its model's tool loop.

Tools: ``lookup_agent``, ``search_agents``, ``get_rating`` (with its intervals, n, coverage, null reasons
and a plain-text explanation), ``leaderboard``, ``outcome_stats`` and ``verify_attestation`` (offline:
the bundle's proofs and signatures are checked and the rating recomputed here, trusting only the log's
verifier key). Resources: the methodology document and every published weights file.

The tools read through a :class:`Bureau`: :class:`HttpBureau` asks a trustscore server over its REST API
(``trustscore mcp`` over stdio); the service's own mount at ``/mcp`` (streamable HTTP) passes one that
calls the services directly (trustscore.api.mcp_mount). Every input is bounded by the tool's
schema; every failure the caller can cause or meet is a tool error with one line, never a traceback.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from typing import Annotated, Any, Literal, Protocol
from urllib.parse import quote

import httpx
import msgspec
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from trustscore import __version__, resources
from trustscore.attestations import rating as attestation
from trustscore.errors import Busy, TrustscoreError
from trustscore.ladder.stats import MAX_GROUP_NAME
from trustscore.ledger import note
from trustscore.ledger.keys import ID_PATTERN
from trustscore.ledger.merkle import MAX_INDEX
from trustscore.scoring.weights import PUBLISHED_DIR, load_published
from trustscore.services.budget import WorkBudget
from trustscore.services.rating_explain import explain

METHODOLOGY = resources.path("docs", "methodology.md")
MAX_BUNDLE = 8 * 1024 * 1024  # bytes of an attestation bundle the verifier reads
MAX_ANSWER = 16 * 1024 * 1024  # bytes of a server answer the stdio server reads

# The REST routes' pattern (api/openapi.KEY_ID_PATTERN): both transports refuse a malformed id alike.
AgentId = Annotated[
    str,
    Field(
        min_length=1,
        max_length=200,
        pattern=ID_PATTERN,
        description="the agent's id, ts1_ and 40 lowercase hex (from search_agents)",
    ),
]
Model = Annotated[
    str | None, Field(default=None, max_length=64, description="model version; default the server's")
]
Dimension = Annotated[str | None, Field(default=None, max_length=64, description="rank by one dimension")]
GroupBy = Literal["model", "adapter", "exam", "marketplace", "repo"]


class Bureau(Protocol):
    """Where the tools read: each method returns the JSON the REST API returns for the same question."""

    async def agent(self, agent_id: str) -> dict[str, Any]: ...

    async def search(self, query: str, limit: int) -> dict[str, Any]: ...

    async def rating(self, agent_id: str, model: str | None) -> dict[str, Any]: ...

    async def leaderboard(self, model: str | None, dimension: str | None, limit: int) -> dict[str, Any]: ...

    async def outcome_stats(
        self, group_by: str, floor: int | None, after: str | None, log_size: int | None
    ) -> dict[str, Any]: ...

    async def log_key(self) -> str: ...


class HttpBureau:
    """A trustscore server's REST API; its problem details become tool errors."""

    def __init__(self, server: str, *, timeout: float = 30.0) -> None:
        if not server.startswith(("http://", "https://")):
            raise TrustscoreError(f"server must be an http(s) URL, got {server[:80]!r}")
        self.server = server.rstrip("/")
        self._http = httpx.AsyncClient(base_url=self.server, timeout=timeout)

    async def _get(self, path: str, params: dict[str, Any] | None = None) -> httpx.Response:
        query = {k: v for k, v in (params or {}).items() if v is not None}
        try:
            r = await self._http.get(path, params=query)
        except httpx.HTTPError as exc:
            raise ToolError(f"cannot reach the trustscore server at {self.server}: {_one_line(exc)}") from exc
        if r.status_code != 200:
            raise ToolError(_problem(r))
        if len(r.content) > MAX_ANSWER:
            raise ToolError("the server's answer is too large")
        return r

    async def _json(self, path: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        r = await self._get(path, params)
        try:
            body = r.json()
        except ValueError as exc:
            raise ToolError(f"{self.server}{path} did not answer JSON") from exc
        if not isinstance(body, dict):
            raise ToolError(f"{self.server}{path} did not answer a JSON object")
        return body

    async def agent(self, agent_id: str) -> dict[str, Any]:
        return await self._json(f"/v1/agents/{quote(agent_id, safe='')}")

    async def search(self, query: str, limit: int) -> dict[str, Any]:
        return await self._json("/v1/search/agents", {"q": query, "limit": limit})

    async def rating(self, agent_id: str, model: str | None) -> dict[str, Any]:
        return await self._json(f"/v1/agents/{quote(agent_id, safe='')}/rating", {"model": model})

    async def leaderboard(self, model: str | None, dimension: str | None, limit: int) -> dict[str, Any]:
        return await self._json("/v1/leaderboard", {"model": model, "dimension": dimension, "limit": limit})

    async def outcome_stats(
        self, group_by: str, floor: int | None, after: str | None, log_size: int | None
    ) -> dict[str, Any]:
        params = {"group_by": group_by, "floor": floor, "after": after, "log_size": log_size}
        return await self._json("/v1/stats/outcomes", params)

    async def log_key(self) -> str:
        return (await self._get("/v1/log/key")).text.strip()

    async def aclose(self) -> None:
        await self._http.aclose()


def _problem(r: httpx.Response) -> str:
    """One line from an RFC 9457 problem answer (its title and detail), else the status."""
    try:
        body = r.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("detail") or body.get("title"), str):
        text = str(body.get("detail") or body.get("title"))
        return f"{text} (HTTP {r.status_code})"[:500]
    return f"the trustscore server answered HTTP {r.status_code}"


def _one_line(exc: BaseException) -> str:
    return (" ".join(str(exc).split()) or type(exc).__name__)[:300]


async def _call(coro: Any) -> dict[str, Any]:
    """Await a bureau call; the bureau's own errors (not found, bad input) become tool errors."""
    try:
        result: dict[str, Any] = await coro
    except TrustscoreError as exc:
        raise ToolError(exc.message) from exc
    return result


def _raw(bundle: dict[str, Any] | str) -> bytes:
    """The bundle's JSON bytes; ToolError past :data:`MAX_BUNDLE`."""
    try:
        raw = bundle.encode() if isinstance(bundle, str) else msgspec.json.encode(bundle)
    except (UnicodeError, TypeError, ValueError) as exc:  # a lone surrogate, say: not JSON text
        raise ToolError(f"not verified: the bundle is not JSON text ({exc})") from exc
    if len(raw) > MAX_BUNDLE:
        raise ToolError(f"the bundle is larger than {MAX_BUNDLE} bytes")
    return raw


def _verify_raw(raw: bytes, trusted_key: str | None) -> dict[str, Any]:
    """Verify an attestation bundle offline and recompute its rating: the summary, or ToolError saying
    the first thing that failed. Pure (reads only the published weights file the bundle names)."""
    try:
        decoded = attestation.decode_bundle(raw)
        trusted = None if trusted_key is None else note.parse_verifier_key(trusted_key.strip())
        verified = attestation.verify_bundle(decoded, load_published(decoded.weights_model), trusted)
    except TrustscoreError as exc:
        raise ToolError(f"not verified: {exc.message}") from exc
    return {**verified.summary(), "trusted_log_key": trusted_key or decoded.log_verifier_key}


#: Bytes of bundles one process's verifications hold at once, running and queued: the largest the tool
#: reads. A check costs ~0.1-0.2 ms of CPU per event entry (0.3-0.6 s for 1,000-1,800 events).
VERIFY_IN_FLIGHT = MAX_BUNDLE
#: Seconds a verification waits for room in the budget before the tool says the server is busy.
VERIFY_WAIT = 5.0


class Verifications:
    """The tool's verifications, one at a time in a thread of their own, within a budget of bundle bytes.

    A bundle of a few MiB takes a few hundred milliseconds of CPU to check: run on the event loop, each
    held every other request of the process up that long (0.30-0.55 s for bundles of 1,000-1,800 events,
    bench/attestations.py --mcp-verify), and anyone may call the tool. Its own single worker keeps them
    off the loop and out of the default thread pool the service's appends and makings use (verifications
    there, many at once, held those up by seconds: found by review), and runs one at a time (one core at
    most, and the interpreter shared with the loop by one thread only). The budget bounds what waits for
    that worker: callers past it wait, then are refused. A caller that leaves (a cancelled call) keeps its
    hold until its check ends, since a thread cannot be stopped."""

    def __init__(self, in_flight: int = VERIFY_IN_FLIGHT, max_wait: float = VERIFY_WAIT) -> None:
        self.budget = WorkBudget(in_flight, max_wait, "bundle bytes")
        self._worker = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="verify-attestation")

    async def verify(self, bundle: dict[str, Any] | str, trusted_key: str | None) -> dict[str, Any]:
        """The bundle verified (:func:`_verify_raw`) by the worker, holding its bytes of the budget."""
        loop = asyncio.get_running_loop()
        raw = await loop.run_in_executor(self._worker, _raw, bundle)  # an object is encoded there too
        try:
            async with self.budget.hold(len(raw)):
                check = loop.run_in_executor(self._worker, _verify_raw, raw, trusted_key)
                try:
                    return await asyncio.shield(check)
                except asyncio.CancelledError:
                    await asyncio.wait([check])  # the thread goes on: its bytes stay held until it ends
                    raise
        except Busy as exc:
            raise ToolError(f"the server is busy verifying other bundles: {exc.message}") from exc


def build_server(bureau: Bureau, verifications: Verifications | None = None) -> MCPServer:
    """The MCP server whose tools read ``bureau``; its attestation checks run in ``verifications`` (a
    budget of its own by default)."""
    verifications = verifications or Verifications()
    server: MCPServer = MCPServer(
        "trustscore",
        title="trustscore credit bureau for AI agents",
        version=__version__,
        instructions=(
            "Check an AI agent before relying on it: search_agents by name, then get_rating for its "
            "scores with uncertainty. A null score means unknown (no evidence), never a low score. "
            "Names are not identities: compare agent ids."
        ),
    )

    @server.tool(title="Look up an agent")
    async def lookup_agent(agent_id: AgentId) -> dict[str, Any]:
        """An agent's current card (name, endpoint, declared model, capabilities, controller), its
        verification status and any earlier agents whose names look like its name."""
        return await _call(bureau.agent(agent_id))

    @server.tool(title="Search agents")
    async def search_agents(
        query: Annotated[str, Field(min_length=1, max_length=100, description="a name, or an id prefix")],
        limit: Annotated[int, Field(ge=1, le=50)] = 10,
    ) -> dict[str, Any]:
        """Agents whose display name looks like it contains ``query`` (look-alike names match too, so
        compare ids) or whose id starts with it; exact matches first."""
        return await _call(bureau.search(query, limit))

    @server.tool(title="Get an agent's rating")
    async def get_rating(agent_id: AgentId, model: Model = None) -> dict[str, Any]:
        """The agent's rating: total and grade with its interval (the level is in the weights file), coverage, n, each dimension's score,
        interval, n and null reason, verification status, and an explanation in plain sentences."""
        rating = await _call(bureau.rating(agent_id, model))
        return {"rating": rating, "explanation": explain(rating)}

    @server.tool(title="Leaderboard")
    async def leaderboard(
        model: Model = None, dimension: Dimension = None, limit: Annotated[int, Field(ge=1, le=100)] = 20
    ) -> dict[str, Any]:
        """Agents ranked by total (or by one dimension); agents without a score are listed apart with
        the reason, never ranked."""
        return await _call(bureau.leaderboard(model, dimension, limit))

    @server.tool(title="Outcome statistics")
    async def outcome_stats(
        group_by: GroupBy,
        floor: Annotated[int | None, Field(default=None, ge=1, le=1000)] = None,
        after: Annotated[
            str | None,
            Field(default=None, max_length=MAX_GROUP_NAME, description="a previous answer's next"),
        ] = None,
        log_size: Annotated[
            int | None,
            Field(default=None, ge=0, le=MAX_INDEX, description="with after: the first answer's log_size"),
        ] = None,
    ) -> dict[str, Any]:
        """The verified share of work records (rung >= 3) per model, adapter, exam, marketplace or repo, with
        n beside every row; small groups are suppressed with the reason. At most 1,000 groups in name
        order; when ``next`` is set, ask again with ``after`` = next and the first answer's
        ``log_size``."""
        return await _call(bureau.outcome_stats(group_by, floor, after, log_size))

    # The evidence ladder's source document names the tool ``stats_outcomes``: the same tool under that name.
    server.add_tool(
        outcome_stats,
        name="stats_outcomes",
        title="Outcome statistics",
        description="outcome_stats under the name the evidence ladder's source document uses.",
    )

    @server.tool(title="Verify a rating attestation offline")
    async def verify_attestation(
        bundle: Annotated[
            dict[str, Any] | str,
            Field(description="the JSON of GET /v1/agents/{id}/rating/attestation (object or text)"),
        ],
        verifier_key: Annotated[
            str | None,
            Field(default=None, max_length=500, description="the log's verifier key; default this bureau's"),
        ] = None,
    ) -> dict[str, Any]:
        """Check a rating attestation bundle: the checkpoint signature against the log key, every
        entry's inclusion proof and signatures, the attestation's signature, and that recomputing the
        rating from the bundled evidence with the published weights gives every attested number."""
        key = verifier_key if verifier_key is not None else await bureau.log_key()
        return await verifications.verify(bundle, key)

    @server.resource(
        "trustscore://methodology",
        name="methodology",
        title="How ratings are computed",
        mime_type="text/markdown",
    )
    def methodology() -> str:
        """docs/methodology.md: every formula, the uncertainty and the null rules."""
        return METHODOLOGY.read_text(encoding="utf-8")

    for path in sorted(PUBLISHED_DIR.glob("*.toml")):
        _add_weights_resource(server, path.stem)
    return server


def _add_weights_resource(server: MCPServer, model: str) -> None:
    """One published weights file (weights/<model>.toml) as a resource; published files never change."""

    @server.resource(
        f"trustscore://weights/{model}",
        name=f"weights {model}",
        title=f"Weights file {model}",
        mime_type="application/toml",
    )
    def read() -> str:
        return (PUBLISHED_DIR / f"{model}.toml").read_text(encoding="utf-8")


def to_builtins(value: Any) -> dict[str, Any]:
    """A msgspec struct as the JSON object the REST API would answer."""
    out: dict[str, Any] = msgspec.to_builtins(value)
    return out
