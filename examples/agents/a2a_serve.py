"""Serve a scripted agent over A2A on 127.0.0.1, built with the official A2A SDK (``a2a-sdk``): its agent
card at ``/.well-known/agent-card.json`` and the JSON-RPC binding at ``/``.

    python examples/agents/a2a_serve.py --persona good --port 8012
    trustscore exam run --exam capability@1 --agent a2a:http://127.0.0.1:8012 ...

Each question arrives as one A2A message whose data part is the trustscore agent request (docs/sdk.md);
the answer is one A2A message with the scripted persona's text. ``--as-task`` answers with a completed
task holding an artifact instead (both shapes are valid A2A). Prints ``listening on URL`` once the port
is bound; the card answers as soon as the server has started.
"""

from __future__ import annotations

import argparse
import socket
import sys
from pathlib import Path
from typing import Any

import uvicorn
from a2a.helpers import get_data_parts, new_task_from_user_message, new_text_artifact, new_text_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from starlette.applications import Starlette

sys.path.insert(0, str(Path(__file__).parent))
import scripted


class ScriptedExecutor(AgentExecutor):
    """Answers each trustscore request as the scripted persona would."""

    def __init__(self, persona: str, as_task: bool) -> None:
        self.persona, self.as_task = persona, as_task

    def _answer(self, context: RequestContext) -> str:
        assert context.message is not None
        requests = [d for d in get_data_parts(context.message.parts) if isinstance(d, dict)]
        request: dict[str, Any] = (
            requests[0] if requests else {"messages": [{"role": "user", "content": context.get_user_input()}]}
        )
        return str(scripted.answer(self.persona, request))

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        text = self._answer(context)
        if not self.as_task:
            await event_queue.enqueue_event(new_text_message(text, context_id=context.context_id))
            return
        assert context.message is not None
        task = new_task_from_user_message(context.message)
        await event_queue.enqueue_event(task)
        await event_queue.enqueue_event(new_text_artifact_update(task.id, task.context_id, text))
        await event_queue.enqueue_event(
            TaskStatusUpdateEvent(
                task_id=task.id,
                context_id=task.context_id,
                status=TaskStatus(state=TaskState.TASK_STATE_COMPLETED),
            )
        )

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError("scripted answers are immediate")


def new_text_artifact_update(task_id: str, context_id: str, text: str) -> Any:
    from a2a.types.a2a_pb2 import TaskArtifactUpdateEvent

    return TaskArtifactUpdateEvent(
        task_id=task_id, context_id=context_id, artifact=new_text_artifact("answer", text)
    )


def app(persona: str, url: str, as_task: bool = False) -> Starlette:
    card = AgentCard(
        name=f"scripted {persona}",
        description="A scripted trustscore example agent that answers exam items over A2A.",
        version="1.0.0",
        supported_interfaces=[AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")],
        capabilities=AgentCapabilities(streaming=False),
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=["text/plain"],
        skills=[
            AgentSkill(
                id="exam",
                name="answer exam items",
                description="Answers trustscore exam items.",
                tags=["exam"],
            )
        ],
    )
    handler = DefaultRequestHandler(
        agent_executor=ScriptedExecutor(persona, as_task), task_store=InMemoryTaskStore(), agent_card=card
    )
    return Starlette(routes=[*create_agent_card_routes(card), *create_jsonrpc_routes(handler, "/")])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--persona", default="good")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--as-task", action="store_true", help="answer with a completed task and an artifact")
    args = p.parse_args()
    sock = socket.socket()
    sock.bind(("127.0.0.1", args.port))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    print(f"listening on {url}", flush=True)
    server = uvicorn.Server(
        uvicorn.Config(app(args.persona, url + "/", args.as_task), log_level="warning", lifespan="off")
    )
    server.run(sockets=[sock])


if __name__ == "__main__":
    main()
