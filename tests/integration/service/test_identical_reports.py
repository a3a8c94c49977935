"""The same report sent again while the first is still being graded is the first report (200), not a
conflict: a client that retries on a timeout gets its own report back."""

from __future__ import annotations

import asyncio

import httpx
import msgspec

from tests.helpers import new_card
from tests.integration.service.conftest import ServerProcess
from trustscore.exams.loader import DEFAULT_PUBLIC_DIR, ExamDirs, load_exam
from trustscore.sdk import agent_from_spec, run_exam
from trustscore.sdk.runner import sign_run

AGENTS = DEFAULT_PUBLIC_DIR.parent / "examples" / "agents" / "scripted.py"


async def test_identical_reports_in_flight_at_once_are_one_report(server: ServerProcess) -> None:
    run = run_exam(load_exam("integrity@1", ExamDirs()), agent_from_spec(f"python:{AGENTS}:good"))
    async with httpx.AsyncClient(base_url=server.url, timeout=60) as http:
        for round_ in range(40):
            key, card = new_card(f"twice-{round_}")
            assert (await http.post("/v1/log/entries", content=msgspec.json.encode(card))).status_code == 201
            body = msgspec.json.encode(sign_run(run, key))

            async def later(delay: float, body: bytes) -> httpx.Response:
                await asyncio.sleep(delay)
                return await http.post("/v1/reports", content=body)

            # The second arrives 0 to 40 ms after the first: while it is graded (429: one report of an
            # agent at a time), while it is appended, or once it is in the log.
            answers = await asyncio.gather(later(0, body), later(round_ * 0.001, body))
            codes = sorted(r.status_code for r in answers)
            assert codes in ([200, 201], [201, 429]), [r.text for r in answers]
            assert len({r.json()["report_index"] for r in answers if r.status_code < 300}) == 1
