"""Sit a fresh exam on a server: open a sitting, put its prompts to the agent (dialogues are played with
the server's counterpart), and report the responses; or practise on a local instance (docs/sdk.md).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

import msgspec

from trustscore import canonical
from trustscore.client import LogClient
from trustscore.errors import InvalidInput
from trustscore.exams.forms import form_for, instantiate, sitting_exam
from trustscore.exams.loader import ExamDirs, load_exam
from trustscore.exams.model import ExamFile, ExamSet
from trustscore.grading.model import Ask, Item
from trustscore.kinds.exam_report import ReportItem, sdk_version
from trustscore.kinds.parties import new_nonce, now
from trustscore.kinds.sittings import SittingReport, make_report, make_request
from trustscore.ledger import dsse, keys
from trustscore.sdk.adapters import Agent
from trustscore.sdk.runner import Dialogue, Progress, RunResult, run_exam


class SittingClient(LogClient):
    """The sitting routes of a trustscore server."""

    def __enter__(self) -> SittingClient:
        return self

    def _post(self, path: str, body: Any) -> Any:
        return self._json(
            "POST", path, content=msgspec.json.encode(body), headers={"content-type": "application/json"}
        )

    def open(self, key: keys.SigningKey, exam: str) -> dict[str, Any]:
        envelope = dsse.sign(make_request(key.id, exam), [key])
        opened: dict[str, Any] = self._post("/v1/sittings", envelope)
        return opened

    def dialogue(self, sitting: int, token: str) -> Dialogue:
        def play(item: Item, outputs: list[str]) -> str | None:
            out = self._post(
                f"/v1/sittings/{sitting}/dialogue", {"token": token, "item_id": item.id, "outputs": outputs}
            )
            message = out.get("message")
            return message if isinstance(message, str) else None

        return play

    def report(self, sitting: int, envelope: dsse.Envelope) -> dict[str, Any]:
        closed: dict[str, Any] = self._post(f"/v1/sittings/{sitting}/report", envelope)
        return closed

    def state(self, sitting: int) -> dict[str, Any]:
        state: dict[str, Any] = self._json("GET", f"/v1/sittings/{sitting}")
        return state


def exam_of(opened: dict[str, Any]) -> ExamSet:
    """The opened sitting as an exam set the runner can put to an agent (prompts only, no arguments)."""
    try:
        items = [
            Item(id=i["id"], dimension=i["dimension"], tier="private", grader=i["grader"],
                 ask=Ask(kind=i["kind"], prompts=i["prompts"], times=i["times"]), timeout_ms=i["timeout_ms"])
            for i in opened["items"]
        ]  # fmt: skip
        name, version = str(opened["exam"]).split("@")
        file = ExamFile(1, name, int(version), items[0].dimension, "private", "fresh sitting",
                        str(opened["instructions"]), items)  # fmt: skip
    except (KeyError, TypeError, ValueError, IndexError, msgspec.ValidationError) as exc:
        raise InvalidInput(f"the server's sitting is malformed: {exc}") from exc
    return ExamSet(file, "sha256:" + "0" * 64)


@dataclass(frozen=True)
class SatSitting:
    opened: dict[str, Any]
    run: RunResult
    closed: dict[str, Any]


def sit_on_server(
    client: SittingClient, key: keys.SigningKey, exam: str, agent: Agent, *,
    timeout_s: float | None = None, progress: Progress | None = None,
) -> SatSitting:  # fmt: skip
    """Open a sitting of ``exam``, run it with ``agent`` and report it; the server's grades come back."""
    opened = client.open(key, exam)
    sitting, token = int(opened["sitting"]), str(opened["token"])
    run = run_exam(exam_of(opened), agent, timeout_s=timeout_s, progress=progress,
                   counterpart=client.dialogue(sitting, token), grade=False)  # fmt: skip
    commitment = _commitment(client, sitting)
    envelope = sign_sitting_report(run, key, sitting, commitment)
    return SatSitting(opened, run, client.report(sitting, envelope))


def _commitment(client: LogClient, sitting: int) -> str:
    """The commitment of sitting-open entry ``sitting`` (the report repeats it to bind itself)."""
    [(_, leaf)] = client.entries(sitting, sitting + 1)
    envelope = msgspec.json.decode(leaf)
    statement = msgspec.json.decode(canonical.b64decode(envelope["payload"], what="payload"))
    value = statement.get("predicate", {}).get("commitment")
    if not isinstance(value, str):
        raise InvalidInput(f"log entry {sitting} is not a sitting-open statement")
    return value


def sign_sitting_report(run: RunResult, key: keys.SigningKey, sitting: int, commitment: str) -> dsse.Envelope:
    items = [ReportItem(r.item.id, r.response.turns, r.response.error, r.grade.value, r.grade.result)
             for r in run.records]  # fmt: skip
    report = SittingReport(
        nonce=new_nonce(), issued_at=now(), agent=key.id, sitting=sitting, commitment=commitment,
        adapter=run.adapter[:2048] or "unknown", sdk_version=sdk_version(), started_at=run.started_at,
        elapsed_ms=run.elapsed_ms, items=items,
    )  # fmt: skip
    return dsse.sign(make_report(report), [key])


def practice_exam(exam: str, dirs: ExamDirs, seed: bytes | None = None) -> ExamSet:
    """A local practice instance of ``exam`` from a random seed (graded locally, never submitted)."""
    return sitting_exam(load_exam(exam, dirs), instantiate(form_for(exam), seed or secrets.token_bytes(32)))
