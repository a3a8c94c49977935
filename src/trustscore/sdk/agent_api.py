"""What every adapter shares: the question put to an agent, the agent protocol and its failures.

Kept apart from the adapters (trustscore.sdk.adapters re-exports every name) so that an adapter in its
own module, such as the A2A one, needs nothing from the module that picks adapters by spec.
"""

from __future__ import annotations

from typing import Literal, Protocol

import msgspec

from trustscore.errors import TrustscoreError


class AgentFailure(TrustscoreError):
    """The agent did not produce a usable answer (recorded on the item, not raised to the user)."""

    code = "agent-failure"
    status = 502
    title = "Agent failed"


class AgentUnreachable(AgentFailure):
    """The agent could not be reached at all (connection refused, command cannot start)."""

    code = "agent-unreachable"
    title = "Agent unreachable"


class Message(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    role: Literal["system", "user", "assistant"]
    content: str


class AgentRequest(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """One question to the agent: which exam and item, which turn, and the conversation so far."""

    exam: str
    item_id: str
    turn: int
    messages: list[Message]


class Agent(Protocol):
    label: str

    def ask(self, request: AgentRequest, timeout_s: float) -> str: ...

    def close(self) -> None: ...
