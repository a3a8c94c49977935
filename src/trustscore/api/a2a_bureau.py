"""The bureau as an A2A agent (official A2A SDK): its card at ``/.well-known/agent-card.json`` and its
skills answered over the JSON-RPC binding at ``/a2a/``.

A skill is asked with one message whose data part is ``{"skill": NAME, ...arguments}``, the arguments
of the MCP tool of that name (``lookup_agent``, ``search_agents``, ``get_rating``, ``leaderboard``,
``outcome_stats``, ``verify_attestation``); a message with text only searches agents by that text. Each
call runs the MCP tool in-process, so both protocols validate and answer alike. The answer is one
message: a data part with the tool's JSON (or ``{"error": ...}``) and a text part saying it in a line.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import msgspec
from a2a.helpers import get_data_parts, new_data_part, new_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.routes import create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore
from a2a.types.a2a_pb2 import AgentCapabilities, AgentCard, AgentInterface, AgentProvider, AgentSkill
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH
from litestar import Request, Response, get
from litestar.enums import ScopeType
from litestar.handlers import asgi
from litestar.types import Guard, Receive, Scope, Send
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from starlette.applications import Starlette

from trustscore import __version__
from trustscore.api.mount_bodies import answered, bounded_body, gate, replayed
from trustscore.api.public_url import public_base
from trustscore.errors import TOO_DEEP, InvalidInput

A2A_PATH = "/a2a"
SKILLS = {
    "lookup_agent": ("Look up an agent", "An agent's card, verification status and look-alike names."),
    "search_agents": ("Search agents", "Agents by display name (look-alikes too) or id prefix."),
    "get_rating": (
        "Get a rating",
        "An agent's rating with its intervals, n, coverage, null reasons and an explanation.",
    ),
    "leaderboard": ("Leaderboard", "Agents ranked by total or one dimension; unscored agents apart."),
    "outcome_stats": ("Outcome statistics", "The verified share of work records per group, with n."),
    "verify_attestation": (
        "Verify a rating attestation",
        "Check a rating attestation bundle offline against the log key and recompute the rating.",
    ),
}


def bureau_card(base_url: str) -> AgentCard:
    """The bureau's A2A agent card, its JSON-RPC interface under ``base_url``."""
    return AgentCard(
        name="trustscore",
        description=(
            "A public credit bureau for AI agents: look up an agent, its rating with uncertainty, the "
            "leaderboard, and verify a rating attestation before relying on another agent."
        ),
        version=__version__,
        provider=AgentProvider(organization="trustscore", url=base_url),
        documentation_url=base_url + "/schema",
        supported_interfaces=[
            AgentInterface(url=base_url + A2A_PATH + "/", protocol_binding="JSONRPC", protocol_version="1.0")
        ],
        capabilities=AgentCapabilities(streaming=False),
        default_input_modes=["application/json", "text/plain"],
        default_output_modes=["application/json", "text/plain"],
        skills=[
            AgentSkill(
                id=skill,
                name=name,
                description=f'{text} Send a data part {{"skill": "{skill}", ...}} with the MCP tool\'s arguments.',
                tags=["trust", "rating", "agents"],
                input_modes=["application/json"],
                output_modes=["application/json"],
            )
            for skill, (name, text) in SKILLS.items()
        ],
    )


def _integers(value: Any) -> Any:
    """``value`` with whole doubles as integers again (a protobuf Value carries every number as a double;
    an attestation bundle's indexes must come back as the integers they were)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _integers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_integers(v) for v in value]
    return value


class BureauExecutor(AgentExecutor):
    """Answers a skill request by running the MCP tool of the same name."""

    def __init__(self, tools: MCPServer) -> None:
        self.tools = tools

    async def _answer(self, context: RequestContext) -> dict[str, Any]:
        if context.message is None:
            return {"error": "no message"}
        data = [d for d in get_data_parts(context.message.parts) if isinstance(d, dict)]
        if data:
            args = dict(data[0])
            skill = args.pop("skill", None)
        else:
            skill, args = "search_agents", {"query": context.get_user_input()[:100]}
        if skill not in SKILLS:
            return {"error": f"unknown skill {str(skill)[:60]!r}; one of {', '.join(SKILLS)}"}
        args = {key: _integers(value) for key, value in args.items()}
        try:
            result = await self.tools.call_tool(str(skill), args)
        except ToolError as exc:
            return {"error": str(exc)[:500]}
        structured = getattr(result, "structured_content", None)
        if getattr(result, "is_error", False) or not isinstance(structured, dict):
            text = " ".join(getattr(c, "text", "") for c in getattr(result, "content", []))
            return {"error": text[:500] or "the skill failed"}
        return structured

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        answer = await self._answer(context)
        line = f"error: {answer['error']}" if "error" in answer else json.dumps(answer)[:2000]
        await event_queue.enqueue_event(
            new_message([new_data_part(answer), new_text_part(line)], context_id=context.context_id)
        )

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Every answer is immediate: there is nothing to cancel."""


#: The largest JSON-RPC request the bureau reads: a question to its tools is a few hundred bytes. The
#: SDK's Starlette app reads a body of any size (150 MB was read and parsed, found by fuzzing).
MAX_A2A_BODY = 1 << 20


class A2ABureau:
    """The card route and the JSON-RPC mount for the app."""

    def __init__(self, tools: MCPServer, guards: Sequence[Guard] = (), max_body: int = MAX_A2A_BODY) -> None:
        """``max_body``: the operator's body limit, when smaller than :data:`MAX_A2A_BODY`."""
        limit = min(max_body, MAX_A2A_BODY)
        placeholder = bureau_card("http://127.0.0.1")  # the handler needs a card; served cards are per host
        handler = DefaultRequestHandler(
            agent_executor=BureauExecutor(tools), task_store=InMemoryTaskStore(), agent_card=placeholder
        )
        self.app = Starlette(routes=create_jsonrpc_routes(handler, "/"))

        @asgi(A2A_PATH, is_mount=True, copy_scope=True, include_in_schema=False, guards=list(guards))
        async def a2a_endpoint(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] == ScopeType.HTTP:
                if await gate(scope, send, "the A2A endpoint takes JSON-RPC requests by POST"):
                    return
                checked = await answered(scope, send, lambda: _checked_body(scope, receive, limit))
                if checked is None:
                    return
                receive = checked
            await self.app(scope, receive, send)  # type: ignore[arg-type]

        @get(AGENT_CARD_WELL_KNOWN_PATH, include_in_schema=False, sync_to_thread=False)
        def agent_card(request: Request[Any, Any, Any]) -> Response[dict[str, Any]]:
            """The bureau's A2A agent card, naming the service's A2A endpoint (api/public_url.py)."""
            base, headers = public_base(request)
            return Response(agent_card_to_dict(bureau_card(base)), headers=headers)

        self.handlers = [a2a_endpoint, agent_card]


async def _checked_body(scope: Scope, receive: Receive, limit: int = MAX_A2A_BODY) -> Receive:
    """Read a POST's body, at most ``limit`` bytes (413 problem+json beyond), and refuse one that is not
    JSON as RFC 8259 has it (400: a lone surrogate in an id made the SDK answer a plain-text 500, found by
    fuzzing); the body is then handed on to the SDK as one message."""
    body = await bounded_body(scope, receive, limit)
    try:
        msgspec.json.decode(body)
    except msgspec.DecodeError as exc:
        raise InvalidInput(f"the request body is not JSON: {exc}") from None
    except RecursionError:
        raise InvalidInput(f"the request body: {TOO_DEEP}") from None
    return replayed(body, receive)
