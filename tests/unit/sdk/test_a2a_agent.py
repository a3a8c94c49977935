"""The a2a: adapter's pure parts: specs, the message it sends and how every reply shape is read."""

from __future__ import annotations

import pytest
from a2a.helpers import get_data_parts, new_text_artifact, new_text_message
from a2a.types.a2a_pb2 import StreamResponse, Task, TaskState, TaskStatus

from trustscore.errors import InvalidInput
from trustscore.ledger import statements
from trustscore.sdk import agent_from_spec
from trustscore.sdk.a2a_agent import a2a_message, answer_text, parse_spec
from trustscore.sdk.adapters import AgentFailure, AgentRequest, AgentUnreachable, Message


@pytest.mark.parametrize(
    "spec",
    [
        "a2a:",
        "a2a:ftp://x/",
        "a2a:127.0.0.1:80",
        "a2a:http://",
        "a2a:http://" + "x" * 3000,
        "a2a:a2a:http://x/",
    ],
)
def test_bad_specs_are_refused(spec: str) -> None:
    with pytest.raises(InvalidInput):
        parse_spec(spec)
    with pytest.raises(InvalidInput):
        agent_from_spec(spec)


def test_card_endpoint_accepts_a2a_and_refuses_the_rest() -> None:
    statements.check_endpoint("a2a:https://agent.example/", what="endpoint")
    statements.check_endpoint("https://agent.example/", what="endpoint")
    for bad in ("a2a:", "a2a:ftp://x/", "a2b:https://x/", "a2a:a2a:https://x/"):
        with pytest.raises(InvalidInput, match="endpoint must be an http"):
            statements.check_endpoint(bad, what="endpoint")


def test_message_carries_the_newest_user_turn_and_the_whole_request() -> None:
    request = AgentRequest(
        "negotiation@1",
        "n-1",
        1,
        [Message("user", "first"), Message("assistant", "ok"), Message("user", "second")],
    )
    message = a2a_message(request)
    assert message.parts[0].text == "second"
    (data,) = get_data_parts(message.parts)
    assert data["item_id"] == "n-1" and [m["content"] for m in data["messages"]] == ["first", "ok", "second"]


def test_reply_shapes() -> None:
    assert answer_text(StreamResponse(message=new_text_message("42"))) == "42"
    done = Task(
        id="t",
        status=TaskStatus(state=TaskState.TASK_STATE_COMPLETED),
        artifacts=[new_text_artifact("a", "7")],
    )
    assert answer_text(StreamResponse(task=done)) == "7"
    said = Task(
        id="t", status=TaskStatus(state=TaskState.TASK_STATE_COMPLETED, message=new_text_message("in status"))
    )
    assert answer_text(StreamResponse(task=said)) == "in status"


@pytest.mark.parametrize(
    ("state", "says"),
    [
        (TaskState.TASK_STATE_FAILED, "failed"),
        (TaskState.TASK_STATE_REJECTED, "rejected"),
        (TaskState.TASK_STATE_INPUT_REQUIRED, "more input"),
        (TaskState.TASK_STATE_WORKING, "did not complete"),
    ],
)
def test_unfinished_or_failed_tasks_fail_the_item(state: TaskState, says: str) -> None:
    task = Task(id="t", status=TaskStatus(state=state, message=new_text_message("why\\nnot")))
    with pytest.raises(AgentFailure, match=says):
        answer_text(StreamResponse(task=task))
    with pytest.raises(AgentFailure, match="neither"):
        answer_text(StreamResponse())


def test_unreachable_agent_fails_within_its_timeout() -> None:
    agent = agent_from_spec("a2a:http://127.0.0.1:9")  # discard port: nothing listens
    try:
        with pytest.raises(AgentUnreachable, match="agent card"):
            agent.ask(AgentRequest("e@1", "i", 0, [Message("user", "hi")]), 10)
    finally:
        agent.close()
