"""A schema-driven fuzzer (schemathesis) against a live ``trustscore serve`` (issue #18, strict formats).

Every operation of the served OpenAPI document gets generated requests, valid ones and invalid ones,
sent over real HTTP to 127.0.0.1 only; the responses must never be a 5xx and must match the document
(status code, content type, headers, body schema), and invalid requests must be refused. The server
holds a registered agent with a graded exam report, so the agent's routes are fuzzed with its real id
as well and their success bodies are checked too. Hypothesis is derandomized (a fixed seed from each
test's source), so a run is repeatable; about 25 s on two cores.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any

import httpx
import msgspec
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import Case, GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.result import Ok
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.helpers import new_card
from tests.integration.service.conftest import ServerProcess
from trustscore.exams.loader import DEFAULT_PUBLIC_DIR, ExamDirs, load_exam
from trustscore.sdk import agent_from_spec, run_exam
from trustscore.sdk.runner import sign_run

EXAMPLES = 25  # per operation and generation mode
CONFORMANCE = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]
AnyCase = Case[Any]
AGENTS = DEFAULT_PUBLIC_DIR.parent / "examples" / "agents" / "scripted.py"


def seed(url: str) -> str:
    """Register an agent, log a graded exam report for it, wait until it is rated; return its id."""
    key, card = new_card("fuzzed")
    run = run_exam(load_exam("integrity@1", ExamDirs()), agent_from_spec(f"python:{AGENTS}:good"))
    for path, envelope in [("/v1/log/entries", card), ("/v1/reports", sign_run(run, key))]:
        r = httpx.post(url + path, content=msgspec.json.encode(envelope), timeout=30)
        assert r.status_code == 201, r.text
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        r = httpx.get(f"{url}/v1/agents/{key.id}/rating", timeout=10)
        if r.status_code == 200 and r.json()["n"] > 0:
            return key.id
        time.sleep(0.2)
    raise AssertionError(f"the agent was not rated in time: {r.text}")


def fuzz(strategy: Any, call: Callable[[AnyCase], None], examples: int = EXAMPLES) -> list[str]:
    """Send ``examples`` requests drawn from ``strategy`` through ``call``; return what failed."""
    failures: list[str] = []

    @given(case=strategy)
    @settings(
        max_examples=examples,
        derandomize=True,
        deadline=None,
        database=None,
        phases=[Phase.explicit, Phase.generate],  # no shrinking: every failure is reported as found
        suppress_health_check=list(HealthCheck),
    )
    def run(case: AnyCase) -> None:
        try:
            call(case)
        except Exception as e:  # a FailureGroup naming every failed check, with a curl to reproduce
            failures.append(f"{case.operation.label}: {e}")

    with contextlib.suppress(Unsatisfiable):  # no parameters or body: no invalid request to generate
        run()
    return failures


@pytest.mark.slow
def test_api_fuzz_finds_no_5xx_and_no_response_contradicting_the_schema(server: ServerProcess) -> None:
    agent = seed(server.url)
    schema = schemathesis.openapi.from_url(server.url + "/schema/openapi.json", timeout=10)
    failures: list[str] = []
    calls = 0

    def check(mode: GenerationMode) -> Callable[[AnyCase], None]:
        checks = CONFORMANCE + ([negative_data_rejection] if mode == GenerationMode.NEGATIVE else [])

        def call(case: AnyCase) -> None:
            nonlocal calls
            calls += 1
            case.call_and_validate(base_url=server.url, checks=checks, timeout=30)

        return call

    operations = []
    for result in schema.get_all_operations():
        assert isinstance(result, Ok), result.err()  # every operation of the document is well formed
        operations.append(result.ok())
    assert len(operations) >= 20
    for op in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            failures += fuzz(op.as_strategy(generation_mode=mode), check(mode))
        names = {p.name for p in op.path_parameters}
        if names & {"agent_id", "key_id"}:  # the real agent: success bodies are checked too
            fixed = {n: agent for n in names & {"agent_id", "key_id"}}
            strategy = op.as_strategy(generation_mode=GenerationMode.POSITIVE, path_parameters=fixed)
            failures += fuzz(strategy, check(GenerationMode.POSITIVE), examples=10)
    assert not failures, "\n\n".join(failures[:5]) + f"\n\n({len(failures)} failures in all)"
    assert calls > 20 * EXAMPLES  # the fuzzer really sent requests
    log = server.output()
    assert "Traceback" not in log and "unhandled error" not in log
