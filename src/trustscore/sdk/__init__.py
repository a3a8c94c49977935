"""The agent SDK: adapters for the agent under test, the exam runner and report submission.

See docs/sdk.md. The graders it uses live in :mod:`trustscore.grading`; the signed report in
:mod:`trustscore.kinds.exam_report`.
"""

from trustscore.sdk.adapters import (
    Agent,
    AgentFailure,
    AgentRequest,
    AgentUnreachable,
    CallableAgent,
    HttpAgent,
    Message,
    OpenAIAgent,
    PythonAgent,
    SubprocessAgent,
    agent_from_spec,
)
from trustscore.sdk.runner import ItemRecord, RunResult, run_exam

__all__ = [
    "Agent",
    "AgentFailure",
    "AgentRequest",
    "AgentUnreachable",
    "CallableAgent",
    "HttpAgent",
    "ItemRecord",
    "Message",
    "OpenAIAgent",
    "PythonAgent",
    "RunResult",
    "SubprocessAgent",
    "agent_from_spec",
    "run_exam",
]
