"""The product end to end through real HTTP and PostgreSQL: exams, re-grading, settlements, ratings.

The scripted example agents sit every public exam, submit signed reports, and end up ranked as their
behaviour deserves; a report claiming perfect answers gains nothing; a settlement ring of fresh keys
moves no served total by more than the published Sybil bound; the ratings served equal ``trustscore score`` run offline
on evidence re-derived from a verified copy of the log.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from tests.integration.service.conftest import ServerProcess
from trustscore import canonical
from trustscore.cli.agent import card_envelope
from trustscore.errors import InvalidInput
from trustscore.exams.loader import DEFAULT_PUBLIC_DIR, ExamDirs, list_exams
from trustscore.exams.reporting import build_report
from trustscore.kinds.exam_report import ExamReport, ReportItem
from trustscore.kinds.parties import make_party_card
from trustscore.kinds.settlements import make_settlement
from trustscore.ledger import dsse, keys, statements
from trustscore.sdk import agent_from_spec, run_exam
from trustscore.sdk.runner import sign_run

AGENTS = DEFAULT_PUBLIC_DIR.parent / "examples" / "agents" / "scripted.py"
WEIGHTS = DEFAULT_PUBLIC_DIR.parent / "weights"
PERSONAS = ("good", "careless", "gullible", "bluffer")


def post(http: httpx.Client, path: str, envelope: Any) -> dict[str, Any]:
    r = http.post(path, content=msgspec.json.encode(envelope))
    assert r.status_code in (200, 201), r.text
    data: dict[str, Any] = r.json()
    return data


def wait_rating(http: httpx.Client, agent: str, model: str, *, min_size: int) -> dict[str, Any]:
    for _ in range(400):
        r = http.get(f"/v1/agents/{agent}/rating", params={"model": model})
        if r.status_code == 200 and r.json()["log_size"] >= min_size:
            data: dict[str, Any] = r.json()
            return data
        time.sleep(0.05)
    raise AssertionError(f"no rating of {agent} covering {min_size} entries")


def claim_perfect(envelope: dsse.Envelope, key: keys.SigningKey) -> dsse.Envelope:
    """The same responses, re-signed with every client-side grade claiming a perfect answer."""
    stmt = statements.parse_statement(canonical.b64decode(envelope.payload))
    report = stmt.predicate
    assert isinstance(report, ExamReport)
    items = [ReportItem(i.item_id, i.turns, i.error, 1000, "success") for i in report.items]
    exam = next(e for e in list_exams(ExamDirs()) if e.id == f"{report.exam}@{report.exam_version}")
    return build_report(
        exam,
        items,
        adapter=report.adapter,
        started_at=report.started_at,
        elapsed_ms=report.elapsed_ms,
        key=key,
    )


@pytest.fixture
def server(tmp_path: Path, dsn: str) -> Any:
    s = ServerProcess(tmp_path / "data", dsn)
    s.start()
    yield s
    s.stop()


def test_agents_ranked_by_behaviour_and_ratings_reproduce_offline(
    server: ServerProcess, tmp_path: Path
) -> None:
    exams = list_exams(ExamDirs())
    http = httpx.Client(base_url=server.url, timeout=120)
    ids: dict[str, keys.SigningKey] = {}
    for persona in (*PERSONAS, "liar"):
        key = keys.SigningKey.generate()
        ids[persona] = key
        post(http, "/v1/log/entries", card_envelope(key, persona))

    last = 0
    server_grades: dict[str, dict[str, int]] = {}
    for persona in PERSONAS:
        agent = agent_from_spec(f"python:{AGENTS}:{persona}")
        for exam in exams:
            envelope = sign_run(run_exam(exam, agent), ids[persona])
            graded = post(http, "/v1/reports", envelope)
            last = max(last, graded["evidence_index"])
            server_grades.setdefault(persona, {}).update(
                {i["item_id"]: i["value_millis"] for i in graded["items"]}
            )
            if persona == "careless":
                # The liar has the careless agent's answers but claims every one was perfect.
                lie = claim_perfect(envelope, ids["liar"])
                lied = post(http, "/v1/reports", lie)
                assert {i["item_id"]: i["value_millis"] for i in lied["items"]} == {
                    i["item_id"]: i["value_millis"] for i in graded["items"]
                }
                last = max(last, lied["evidence_index"])
                r = http.post("/v1/reports", content=msgspec.json.encode(lie))
                assert r.status_code == 200, r.text  # a replay is the first report and writes nothing
                assert r.json()["report_index"] == lied["report_index"] and r.json()["duplicate"]

    ratings = {
        p: wait_rating(http, ids[p].id, "trustscore-v2", min_size=last + 1) for p in (*PERSONAS, "liar")
    }
    totals = {p: r["total"] for p, r in ratings.items()}
    dims = {p: r["dimensions"] for p, r in ratings.items()}
    assert all(t is not None for t in totals.values()), totals
    assert totals["good"] == max(totals.values()), totals
    assert dims["good"]["capability"]["score"] > dims["careless"]["capability"]["score"]
    assert dims["good"]["security"]["score"] > dims["gullible"]["security"]["score"]
    assert dims["good"]["integrity"]["score"] > dims["bluffer"]["integrity"]["score"]
    # Claiming perfect answers gains nothing: the liar rates as the careless agent it copied (evidence
    # graded milliseconds apart decays by a hair, hence the tolerance on the scores).
    liar, careless = ratings["liar"], ratings["careless"]
    assert (liar["total"], liar["grade"], liar["n"]) == (careless["total"], careless["grade"], careless["n"])
    for name, d in liar["dimensions"].items():
        c = careless["dimensions"][name]["score"]
        assert (d["score"] is None) == (c is None)
        # (published to 10^-6, so a hair's difference may land on neighbouring steps)
        assert d["score"] is None or abs(d["score"] - c) < 2e-6, name
    # Null is not zero: no evidence channel reached collaboration, so it is null with a reason.
    assert dims["good"]["collaboration"]["score"] is None
    assert dims["good"]["collaboration"]["null_reason"] == "no_evidence"

    board = http.get("/v1/leaderboard").json()
    assert board["ranked"][0]["agent"] == ids["good"].id
    assert board["model_version"] == "trustscore-v2"

    # A ring of three fresh counterparties "buys" perfect deliveries from the careless agent.
    seller = ids["careless"].id
    before = {m: wait_rating(http, seller, m, min_size=last + 1) for m in ("trustscore-v2", "baseline-v0.3")}
    for n in range(3):
        buyer = keys.SigningKey.generate()
        post(
            http,
            "/v1/log/entries",
            dsse.sign(make_party_card(buyer.public_key, f"ring-{n}", "counterparty"), [buyer]),
        )
        deal = make_settlement(
            deal_id=f"ring-deal-{n}",
            seller=seller,
            buyer=buyer.id,
            reporter_role="buyer",
            settled_at=statements.format_time(statements.parse_time("2026-11-30T00:00:00Z", what="t")),
            delivery="pass",
            confirmed=True,
        )
        last = post(http, "/v1/settlements", dsse.sign(deal, [buyer]))["index"]
    after = {m: wait_rating(http, seller, m, min_size=last + 1) for m in ("trustscore-v2", "baseline-v0.3")}
    # Fresh keys have no standing: they share one small pool beside the agent's standing evidence
    # (docs/methodology.md, "Reporter standing"). Where the agent has none (economic), they add nothing,
    # under every served model; no total moves by more than the published bound.
    for m in ("trustscore-v2", "baseline-v0.3"):
        assert before[m]["dimensions"]["economic"]["score"] is None
        assert after[m]["dimensions"]["economic"]["score"] is None, m
        assert abs(after[m]["total"] - before[m]["total"]) <= 25, m

    # Self-dealing is refused and writes nothing: with oneself, or between keys under one controller.
    boss = keys.SigningKey.generate()
    twins = [keys.SigningKey.generate() for _ in range(2)]
    for twin in twins:
        post(http, "/v1/log/entries", card_envelope(twin, "twin", controller=boss))
    size_before = len(http.get("/v1/log/entries", params={"start": 0, "end": 10_000}).json()["entries"])
    with pytest.raises(InvalidInput, match="seller and buyer"):  # the same check runs in the server
        make_settlement(
            deal_id="self",
            seller=ids["liar"].id,
            buyer=ids["liar"].id,
            reporter_role="buyer",
            settled_at="2026-11-30T00:00:00Z",
            delivery="pass",
        )
    deal = make_settlement(
        deal_id="twins",
        seller=twins[0].id,
        buyer=twins[1].id,
        reporter_role="buyer",
        settled_at="2026-11-30T00:00:00Z",
        delivery="pass",
    )
    r = http.post("/v1/settlements", content=msgspec.json.encode(dsse.sign(deal, [twins[1]])))
    assert r.status_code == 400, r.text
    assert "self-dealing" in r.json()["detail"]
    assert (
        len(http.get("/v1/log/entries", params={"start": 0, "end": 10_000}).json()["entries"]) == size_before
    )

    # The API's numbers equal `trustscore score` run offline on evidence exported from the log.
    vkey = http.get("/v1/log/key").text.strip()
    # The good agent, and the careless one the ring reported on (its ring reports went through the pool).
    for model, persona in [(m, p) for m in ("trustscore-v2", "baseline-v0.3") for p in ("good", "careless")]:
        served = wait_rating(http, ids[persona].id, model, min_size=last + 1)
        for _ in range(200):  # the export needs a checkpoint covering the rating's log prefix
            if int(http.get("/v1/log/checkpoint").text.split("\n")[1]) >= served["log_size"]:
                break
            time.sleep(0.05)
        ev, sn = (
            tmp_path / f"{model}.{persona}.evidence.jsonl",
            tmp_path / f"{model}.{persona}.snapshots.jsonl",
        )
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "trustscore.cli.main",
                "evidence",
                "export",
                "--server",
                server.url,
                "--verifier-key",
                vkey,
                "--size",
                str(served["log_size"]),
                "--model",
                model,
                "--evidence-out",
                str(ev),
                "--snapshots-out",
                str(sn),
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert out.returncode == 0, out.stderr
        assert "entries not counted: 0" in out.stdout, out.stdout
        assert "reporter-standing policy standing-v5" in out.stdout, out.stdout
        scored = subprocess.run(
            [
                sys.executable,
                "-m",
                "trustscore.cli.main",
                "score",
                "--weights",
                str(WEIGHTS / f"{model}.toml"),
                "--evidence",
                str(ev),
                "--snapshots",
                str(sn),
                "--at",
                served["computed_at"],
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert scored.returncode == 0, scored.stderr
        offline = next(json.loads(line) for line in scored.stdout.splitlines() if ids[persona].id in line)
        for field in ("total", "adjusted", "grade", "coverage", "confidence", "n", "model_version"):
            assert offline[field] == served[field], (model, persona, field)
        assert offline["dimensions"] == {k: v["score"] for k, v in served["dimensions"].items()}
        assert offline.get("medals") == served["medals"], (model, persona)  # one function, both sides
        if persona == "careless":  # the ring's reports are in the export, pooled
            assert '"issuer":"pool:standing-v1"' in ev.read_text()
