"""The ``a2a:URL`` adapter: an agent that speaks the A2A protocol sits exams like any other endpoint.

The adapter resolves the agent's A2A card at ``URL/.well-known/agent-card.json`` with the official A2A
SDK (``a2a-sdk``) and sends each question as one A2A message (``SendMessage``, blocking, not streamed):
a text part holding the newest user turn, and a data part holding the whole :class:`AgentRequest`
(exam, item, turn and the conversation so far), so a dialogue agent sees every earlier turn. The answer is
the text of the reply message, or of the completed task's artifacts (else its status message). A task
that ends failed, rejected, canceled or asking for input fails the item (docs/integrations.md).

The SDK is asynchronous and the adapters are not: each adapter runs one event loop in a daemon thread
and waits for each answer with the item's timeout. Its HTTP client is made by ``client_factory``, so the
server's re-verifier passes the guarded outbound client (every request, the card fetch included, is
checked against the operator's outbound policy).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import httpx
import msgspec
from a2a.client import Client, ClientConfig, create_client
from a2a.helpers import get_artifact_text, get_message_text, new_data_part, new_text_part
from a2a.types.a2a_pb2 import Message, Role, SendMessageRequest, Task, TaskState

from trustscore.errors import InvalidInput, TrustscoreError
from trustscore.sdk.agent_api import AgentFailure, AgentRequest, AgentUnreachable

SCHEME = "a2a:"
MAX_BODY = 4 * 1024 * 1024  # bytes of an answer's text, as for the plain HTTP adapter
MAX_URL = 2048
#: Task states that end a task without an answer (the SDK returns a blocking task in a terminal state).
FAILED_STATES = {
    TaskState.TASK_STATE_FAILED: "failed",
    TaskState.TASK_STATE_REJECTED: "rejected",
    TaskState.TASK_STATE_CANCELED: "canceled",
    TaskState.TASK_STATE_INPUT_REQUIRED: "asked for more input",
    TaskState.TASK_STATE_AUTH_REQUIRED: "asked for authentication",
}
T = TypeVar("T")


def parse_spec(spec: str) -> str:
    """The agent's base URL of an ``a2a:URL`` spec (or an A2A card endpoint); InvalidInput otherwise."""
    url = spec.removeprefix(SCHEME)
    if url == spec or not url.startswith(("http://", "https://")) or len(url) > MAX_URL:
        raise InvalidInput(f"an A2A agent spec must be a2a:http(s)://HOST/..., got {spec[:80]!r}")
    parsed = httpx.URL(url)
    if not parsed.host:
        raise InvalidInput(f"an A2A agent spec must name a host, got {spec[:80]!r}")
    return url.rstrip("/")


def a2a_message(request: AgentRequest) -> Message:
    """The A2A message of one question: the newest user turn as text, the whole request as data."""
    user = [m.content for m in request.messages if m.role == "user"]
    return Message(
        role=Role.ROLE_USER,
        message_id=f"{request.exam}/{request.item_id}/{request.turn}",
        parts=[new_text_part(user[-1] if user else ""), new_data_part(msgspec.to_builtins(request))],
    )


def answer_text(event: Any) -> str:
    """The text answer in the SDK's reply (a ``StreamResponse`` with a message or a task)."""
    if event.HasField("message"):
        return get_message_text(event.message)
    if not event.HasField("task"):
        raise AgentFailure("the A2A agent answered neither a message nor a task")
    task: Task = event.task
    why = FAILED_STATES.get(task.status.state)
    if why is not None:
        said = get_message_text(task.status.message) if task.status.HasField("message") else ""
        raise AgentFailure(f"the A2A task {why}" + (f": {' '.join(said.split())[:200]}" if said else ""))
    if task.status.state != TaskState.TASK_STATE_COMPLETED:
        raise AgentFailure(f"the A2A task did not complete (state {TaskState.Name(task.status.state)})")
    texts = [get_artifact_text(a) for a in task.artifacts]
    if not any(texts) and task.status.HasField("message"):
        texts = [get_message_text(task.status.message)]
    return "\n".join(t for t in texts if t)


class A2AAgent:
    """An agent reached over A2A at ``url`` (its base URL, where its agent card is published)."""

    def __init__(
        self,
        url: str,
        *,
        label: str | None = None,
        client_factory: Callable[[], httpx.AsyncClient] | None = None,
    ) -> None:
        self.url = parse_spec(SCHEME + url) if not url.startswith(SCHEME) else parse_spec(url)
        self.label = label or SCHEME + self.url
        self._factory = client_factory or httpx.AsyncClient
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True, name="a2a-agent")
        self._thread.start()
        self._http: httpx.AsyncClient | None = None
        self._client: Client | None = None

    def _run(self, coro: Coroutine[Any, Any, T], timeout_s: float) -> T:
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result(timeout_s)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise AgentFailure(f"no answer within {timeout_s:g} s") from None

    async def _connect(self) -> Client:
        if self._client is None:
            self._http = self._factory()
            try:
                self._client = await create_client(
                    self.url, ClientConfig(streaming=False, httpx_client=self._http)
                )
            except TrustscoreError as exc:  # the guarded client refused the card's address
                raise AgentUnreachable(exc.message) from exc
            except Exception as exc:  # the SDK's own errors, httpx's, a card that does not parse
                raise AgentUnreachable(
                    f"cannot read the A2A agent card of {self.url}: {_one_line(exc)}"
                ) from exc
        return self._client

    async def _ask(self, request: AgentRequest) -> str:
        client = await self._connect()
        answer: str | None = None
        try:
            async for event in client.send_message(SendMessageRequest(message=a2a_message(request))):
                answer = answer_text(event)
                break
        except AgentFailure:
            raise
        except TrustscoreError as exc:
            raise AgentFailure(exc.message) from exc
        except Exception as exc:  # transport errors, JSON-RPC errors, malformed replies
            raise AgentFailure(f"the A2A call failed: {_one_line(exc)}") from exc
        if answer is None:
            raise AgentFailure("the A2A agent sent no reply")
        if len(answer.encode()) > MAX_BODY:
            raise AgentFailure(f"agent's answer is larger than {MAX_BODY} bytes")
        return answer

    def ask(self, request: AgentRequest, timeout_s: float) -> str:
        return self._run(self._ask(request), timeout_s)

    async def _close(self) -> None:
        if self._client is not None:
            await self._client.close()
        if self._http is not None:
            await self._http.aclose()
        self._client = self._http = None

    def close(self) -> None:
        if self._loop.is_closed():
            return
        with contextlib.suppress(Exception):  # closing never fails the run
            asyncio.run_coroutine_threadsafe(self._close(), self._loop).result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        if not self._thread.is_alive():
            self._loop.close()


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:300]
