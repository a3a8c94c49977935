"""The story ``trustscore demo`` tells, against a server it is given (see ``cli/demo.py`` and docs/demo.md).

The steps, in order: register the scripted example agents (their cards declare the endpoints given; the
bluffer's endpoint serves a careless agent) and a counterparty; every agent sits every public exam and
submits the signed reports (the server re-grades them and re-asks each endpoint a sample), then sits fresh
instances (sittings), one of which is checked from the log; two settlements; the leaderboard and one
agent's rating with its proofs (the checkpoint's signature and two evidence entries' signatures and
inclusion, verified here trusting only the log's verifier key); every agent's re-verification status; and
that agent's rating attestation verified offline (and a tampered copy refused). Each step prints its table
as it goes and :meth:`Demo.run` returns what was verified. Starting and stopping the processes is not
its business: :mod:`trustscore.devserver` does that.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shlex
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from trustscore import canonical, resources
from trustscore.attestations import rating as attestation
from trustscore.canonical import b64decode, b64encode
from trustscore.cli.agent import card_envelope
from trustscore.cli.rating import weights_for
from trustscore.cli.sitting import check as check_sitting_cli
from trustscore.cli.table import Column, cell, render
from trustscore.client import LogClient
from trustscore.devserver import AgentProcess
from trustscore.errors import NotFound, NotYetAvailable, StorageError, TrustscoreError, VerificationError
from trustscore.exams.loader import ExamDirs, list_exams
from trustscore.kinds.parties import make_party_card, now
from trustscore.kinds.settlements import Delivery, make_settlement
from trustscore.ledger import checkpoint, dsse, keys, note
from trustscore.sdk import agent_from_spec, run_exam
from trustscore.sdk.runner import sign_run
from trustscore.sdk.sitting import SittingClient, sit_on_server
from trustscore.verifying import VerifyingClient

REPO = resources.ROOT
AGENTS = REPO / "examples" / "agents" / "scripted.py"
WEIGHTS = REPO / "weights"
PERSONAS = ("good", "careless", "gullible", "bluffer")
# The persona each agent's declared endpoint serves: the bluffer's is a careless agent, so re-verification
# finds that its endpoint answers differently from its reports.
ENDPOINT_PERSONA = {"good": "good", "careless": "careless", "gullible": "gullible", "bluffer": "careless"}
MODEL = "trustscore-v2"
FEATURED = "good"  # the agent whose rating and proofs are shown
FRESH_EXAMS = ("integrity@1", "security@1", "negotiation@1")  # sat as fresh sittings (no sandboxed code)
WAIT_TIMEOUT = 60.0
REVERIFY_TIMEOUT = 90.0  # for a recorded re-verification run of every report of every agent
REVERIFY_DEADLINE = 10  # seconds one re-verification run may take
SERVER_LOG = "demo-server.log"  # in the data directory


# --- talking to it -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Server:
    """The demo server as the story sees it: where it answers and the key it printed at start-up."""

    url: str
    port: int
    verifier_key: str


class DemoClient(LogClient):
    """The log client plus the JSON reads and writes of the public and evidence APIs."""

    def get(self, path: str, **params: Any) -> Any:
        return self._json("GET", path, params=params)

    def get_bytes(self, path: str, **params: Any) -> bytes:
        """The raw body of a GET (errors raised as for every other request)."""
        response = self._request("GET", path, params=params)
        return response.content

    def post(self, path: str, envelope: dsse.Envelope) -> Any:
        body = msgspec.json.encode(envelope)
        return self._json("POST", path, content=body, headers={"content-type": "application/json"})


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Rows through the CLI's one table renderer, numeric columns right-aligned, indented two spaces."""
    cells = [[cell(c) for c in r] for r in rows]
    columns = [
        Column(h, right=bool(cells) and all(_is_number(r[i]) for r in cells)) for i, h in enumerate(headers)
    ]
    return "\n".join("  " + line for line in render(columns, rows))


def _row(cells: Sequence[object], widths: Sequence[int], *, numeric: bool) -> str:
    """One table row in fixed widths: the first two columns left-aligned, the rest right-aligned if
    ``numeric`` (for rows printed one at a time, before the whole table is known)."""
    parts = [
        str(c).rjust(w) if numeric and n >= 2 else str(c).ljust(w)
        for n, (c, w) in enumerate(zip(cells, widths, strict=True))
    ]
    return "  " + "  ".join(parts).rstrip()


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return text == "-"
    return True


def _fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def section(title: str) -> None:
    print(f"\n== {title} ==", flush=True)


@dataclass(frozen=True)
class Shown:
    """What the demo verified, for the commands that let a reader check it again."""

    verified_indexes: list[int]
    log_size: int
    computed_at: str


class Demo:
    def __init__(
        self,
        client: DemoClient,
        server: Server,
        endpoints: Mapping[str, AgentProcess],
        data_dir: Path,
        kept: bool,
    ) -> None:
        self.client = client
        self.server = server
        self.endpoints = endpoints
        self.data_dir = data_dir
        self.kept = kept
        self.keys = {p: keys.SigningKey.generate() for p in PERSONAS}
        self.buyer = keys.SigningKey.generate()
        self.names = {k.id: p for p, k in self.keys.items()} | {self.buyer.id: "demo-buyer"}
        self.last_index = 0
        self.reports: dict[str, set[int]] = {p: set() for p in PERSONAS}  # each agent's reports' indexes

    def run(self) -> Shown:
        self.register()
        self.sit_exams()
        self.sit_fresh()
        self.settle()
        # The ratings shown include what re-verification found (the bluffer's mismatches): before, the
        # leaderboard raced the re-verification queue, and on a fast machine the bluffer ranked first.
        reverified = self.wait_reverified()
        ratings = {p: self.wait_rating(p) for p in PERSONAS}
        self.show_leaderboard()
        featured = ratings[FEATURED]
        self.show_rating(featured)
        indexes = self.show_proofs(featured)
        self.show_reverification(reverified)
        self.show_attestation()
        return Shown(indexes, featured["log_size"], featured["computed_at"])

    def _appended(self, index: int) -> None:
        self.last_index = max(self.last_index, index)

    def register(self) -> None:
        section("example agents served over HTTP; each card declares its endpoint")
        served = [(p, e.endpoint, e.persona, e.pid) for p, e in self.endpoints.items()]
        print(table(("agent", "endpoint", "answers as", "pid"), served))
        print("  (the bluffer's endpoint answers as a careless agent: re-verification should catch it)")
        section("registering agents and a counterparty")
        rows: list[tuple[str, str, str, int]] = []
        for persona, key in self.keys.items():
            [entry] = self.client.submit(
                card_envelope(key, persona, endpoint=self.endpoints[persona].endpoint)
            )
            rows.append((persona, "agent", key.id, entry["index"]))
        card = make_party_card(self.buyer.public_key, "demo-buyer", "counterparty")
        [entry] = self.client.submit(dsse.sign(card, [self.buyer]))
        rows.append(("demo-buyer", "counterparty", self.buyer.id, entry["index"]))
        for row in rows:
            self._appended(row[3])
        print(table(("name", "kind", "key id", "log index"), rows), flush=True)

    def sit_exams(self) -> None:
        exams = list_exams(ExamDirs())
        section(f"every agent sits the {len(exams)} public exams; the server re-grades each report")
        # Rows print as each report is graded (the capability exam runs code in a sandbox: seconds).
        widths = (max(map(len, PERSONAS)), max(len(e.id) for e in exams), 5, 17, 9)
        headers = ("agent", "exam", "items", "server mean grade", "log index")
        print(_row(headers, widths, numeric=False), flush=True)
        for persona in PERSONAS:
            agent = agent_from_spec(f"python:{AGENTS}:{persona}")
            try:
                for exam in exams:
                    envelope = sign_run(run_exam(exam, agent), self.keys[persona])
                    graded = self.client.post("/v1/reports", envelope)
                    self._appended(graded["evidence_index"])
                    self.reports[persona].add(graded["report_index"])
                    values = [i["value_millis"] for i in graded["items"]]
                    mean = sum(values) / len(values) / 1000 if values else None
                    cells = (persona, graded["exam"], len(values), _fmt(mean, 3), graded["evidence_index"])
                    print(_row(cells, widths, numeric=True), flush=True)
            finally:
                agent.close()

    def sit_fresh(self) -> None:
        """Every agent sits fresh instances (sittings): memorised answers are worth nothing there, the
        example agents work each question out (examples/agents/solver.py); then one sitting is checked."""
        section(
            f"every agent sits fresh instances of {', '.join(FRESH_EXAMS)}; the server grades each sitting"
        )
        widths = (max(map(len, PERSONAS)), max(map(len, FRESH_EXAMS)), 5, 17, 7, 9)
        print(
            _row(
                ("agent", "exam", "items", "server mean grade", "sitting", "log index"), widths, numeric=False
            )
        )
        checked = None
        with SittingClient(self.server.url) as sittings:
            for persona in PERSONAS:
                agent = agent_from_spec(f"python:{AGENTS}:{persona}")
                try:
                    for exam in FRESH_EXAMS:
                        closed = sit_on_server(sittings, self.keys[persona], exam, agent).closed
                        self._appended(closed["close_index"])
                        values = [i["value_millis"] for i in closed["items"]]
                        mean = sum(values) / len(values) / 1000
                        cells = (
                            persona,
                            exam,
                            len(values),
                            _fmt(mean, 3),
                            closed["sitting"],
                            closed["close_index"],
                        )
                        print(_row(cells, widths, numeric=True), flush=True)
                        checked = checked or closed["sitting"]
                finally:
                    agent.close()
        assert checked is not None
        print(f"\n  anyone can recompute sitting {checked} from the log (trustscore exam check-sitting):")
        check_sitting_cli(argparse.Namespace(server=self.server.url, verifier_key=self.server.verifier_key,
                                             sitting=checked))  # fmt: skip

    def settle(self) -> None:
        section("the counterparty reports two deals")
        deals: tuple[tuple[str, Delivery, bool], ...] = (("good", "pass", True), ("careless", "late", False))
        rows = []
        for n, (persona, delivery, confirmed) in enumerate(deals, 1):
            statement = make_settlement(
                deal_id=f"demo-deal-{n}",
                seller=self.keys[persona].id,
                buyer=self.buyer.id,
                reporter_role="buyer",
                settled_at=now(),
                delivery=delivery,
                confirmed=confirmed,
            )
            index = self.client.post("/v1/settlements", dsse.sign(statement, [self.buyer]))["index"]
            self._appended(index)
            rows.append((f"demo-deal-{n}", persona, delivery, "yes" if confirmed else "no", index))
        print(table(("deal", "seller", "delivery", "confirmed", "log index"), rows), flush=True)

    def wait_rating(self, persona: str) -> dict[str, Any]:
        """The agent's rating once it covers every entry written so far."""
        agent = self.keys[persona].id
        deadline = time.monotonic() + WAIT_TIMEOUT
        while time.monotonic() < deadline:
            with contextlib.suppress(NotFound):
                rating: dict[str, Any] = self.client.get(f"/v1/agents/{agent}/rating", model=MODEL)
                if rating["log_size"] > self.last_index:
                    return rating
            time.sleep(0.1)
        raise StorageError(f"no rating of {persona} covering the log within {WAIT_TIMEOUT:.0f} s")

    def show_leaderboard(self) -> None:
        board = self.client.get("/v1/leaderboard", model=MODEL)
        section(f"leaderboard ({board['model_version']})")
        rows = [(r["rank"], self.name(r["agent"]), r["total"], r["grade"]) for r in board["ranked"]]
        print(table(("rank", "agent", "total", "grade"), rows))
        if board["unranked"]:
            print("unranked:")
            unranked = [(self.name(u["agent"]), u["reason"]) for u in board["unranked"]]
            print(table(("agent", "reason"), unranked))
        else:
            print("unranked: none")

    def name(self, agent_id: str) -> str:
        """The persona's name; an agent of an earlier run on the same data dir by its card's name."""
        if agent_id not in self.names:
            card = self.client.get(f"/v1/agents/{agent_id}")
            self.names[agent_id] = f"{card['name']} ({agent_id[:12]}, earlier run)"
        return self.names[agent_id]

    def show_rating(self, r: dict[str, Any]) -> None:
        section(f"rating of {FEATURED} ({r['agent']})")
        interval = r["total_interval"]
        facts = [
            ("model", f"{r['model_version']} ({r['weights_digest']})"),
            ("computed at", f"{r['computed_at']} over log entries [0, {r['log_size']})"),
            ("total", f"{_fmt(r['total'], 0)}  (90% interval {_interval(interval, 0)})"),
            ("adjusted", _fmt(r["adjusted"], 0)),
            ("grade", r["grade"] or "-"),
            ("coverage", _fmt(r["coverage"], 3)),
            ("confidence", _fmt(r["confidence"], 3)),
            ("evidence items", r["n"]),
        ]
        width = max(len(k) for k, _ in facts)
        for k, v in facts:
            print(f"  {k.ljust(width)}  {v}")
        rows = [
            (name, _fmt(d["score"]), d["n"], _interval(d["interval"], 1), d["null_reason"])
            for name, d in r["dimensions"].items()
        ]
        print(table(("dimension", "score", "n", "90% interval", "null reason"), rows), flush=True)

    def show_proofs(self, rating: dict[str, Any]) -> list[int]:
        """Verify and print the checkpoint and two evidence entries; return the entries' indexes."""
        section(f"proofs for {FEATURED}, checked here trusting only the log's verifier key")
        vkey = self.server.verifier_key
        served = self.client.verifier_key()
        if served != vkey:
            raise VerificationError(f"the server serves verifier key {served!r}, not the one it printed")
        verifier = note.parse_verifier_key(vkey)
        print(f"  log verifier key: {vkey}")
        cp = self.latest_checkpoint(verifier, rating["log_size"])
        print(f"  checkpoint: size {cp.size}, root {b64encode(cp.root)}, signature verified")
        items = self.sample_evidence(rating["agent"])
        for item in items:
            entry = VerifyingClient(self.client, verifier).entry(cp, item["index"]).checked
            print(
                f"  entry {item['index']} ({entry.statement.kind.name}: {item['dimension']} "
                f"from {item['source']}): signatures and inclusion in checkpoint {cp.size} verified"
            )
        return [i["index"] for i in items]

    def latest_checkpoint(self, verifier: note.Verifier, min_size: int) -> checkpoint.Checkpoint:
        """The latest signed checkpoint, once it covers ``min_size`` entries, its signature verified."""
        deadline = time.monotonic() + WAIT_TIMEOUT
        while True:
            cp = checkpoint.open_checkpoint(self.client.checkpoint(), verifier, verifier.name)
            if cp.size >= min_size:
                return cp
            if time.monotonic() > deadline:
                raise StorageError(f"no checkpoint covering {min_size} entries within {WAIT_TIMEOUT:.0f} s")
            time.sleep(0.1)

    def sample_evidence(self, agent: str) -> list[dict[str, Any]]:
        """Two evidence items: the first exam grade and the last (the settlement when there is one)."""
        items: list[dict[str, Any]] = self.client.get(f"/v1/agents/{agent}/evidence", limit=1000)["items"]
        if not items:
            raise NotFound(f"the server lists no evidence about {agent}")
        picked = [items[0]]
        last = next((i for i in reversed(items) if i["index"] != items[0]["index"]), None)
        return picked if last is None else [*picked, last]

    def verification(self, persona: str) -> dict[str, Any]:
        """The agent's re-verification status as its rating shows it."""
        agent = self.keys[persona].id
        status: dict[str, Any] = self.client.get(f"/v1/agents/{agent}/rating", model=MODEL)["verification"]
        return status

    def wait_reverified(self) -> dict[str, dict[str, Any]]:
        """Each agent's re-verification status once the server has recorded a run of every report it
        sent; the ratings waited for next then cover those runs' entries too."""
        deadline = time.monotonic() + REVERIFY_TIMEOUT
        while True:
            status = {p: self.verification(p) for p in PERSONAS}
            pending = [p for p in PERSONAS if not covers(status[p], self.reports[p])]
            if not pending:
                break
            if time.monotonic() > deadline:
                raise StorageError(
                    f"no re-verification of every report of {', '.join(pending)} "
                    f"within {REVERIFY_TIMEOUT:.0f} s (server log: {self.data_dir / SERVER_LOG})"
                )
            time.sleep(0.5)
        self._appended(max(s["latest_index"] for s in status.values()))
        return status

    def show_reverification(self, status: dict[str, dict[str, Any]]) -> None:
        """Tabulate each agent's re-verification status (:meth:`wait_reverified`)."""
        section("re-verification: the server re-asked each agent's endpoint a sample of its reports' items")
        rows = []
        for persona in PERSONAS:
            runs = status[persona]["history"]
            latest = runs[-1]
            matched = sum(1 for r in runs if r["outcome"] == "match")
            rows.append(
                (
                    persona,
                    self.endpoints[persona].persona,
                    "yes" if status[persona]["verified"] else "no",
                    latest["outcome"],
                    f"{latest['matched_millis'] / 1000:.2f}",
                    f"{matched}/{len(runs)}",
                )
            )
        headers = (
            "agent",
            "endpoint answers as",
            "verified",
            "latest outcome",
            "matched share",
            "runs matched",
        )
        print(table(headers, rows))
        print(
            f"  (one run per report, {REVERIFY_DEADLINE} s at most each; verified = the latest run matched)"
        )

    def fetch_attestation(self, agent: str) -> bytes:
        """The attestation bundle of the agent's served rating (retried while the log catches up)."""
        deadline = time.monotonic() + WAIT_TIMEOUT
        while True:
            try:
                return self.client.get_bytes(
                    f"/v1/agents/{agent}/rating/attestation", model=MODEL, format="bundle"
                )
            except NotFound as exc:
                if time.monotonic() > deadline:
                    raise NotYetAvailable(
                        f"no attestation of {FEATURED} within {WAIT_TIMEOUT:.0f} s: {exc.message}"
                    ) from exc
            time.sleep(0.2)

    def show_attestation(self) -> None:
        """Fetch, save and verify the featured agent's attestation bundle offline, then show a tampered
        copy refused."""
        section(f"rating attestation of {FEATURED}, verified offline as `trustscore rating verify` does")
        data = self.fetch_attestation(self.keys[FEATURED].id)
        path = self.data_dir / f"attestation-{FEATURED}.json"
        path.write_bytes(data)
        print(f"  saved GET /v1/agents/{{id}}/rating/attestation?format=bundle to {path}")
        trusted = note.parse_verifier_key(self.server.verifier_key)
        verified = verify_attestation(data, trusted)
        a = verified.attestation
        print(
            f"  attestation verified: {len(a.evidence_entries)} entries, checkpoint {verified.checkpoint.size}, "
            f"total {a.total} recomputed (grade {a.grade}, n {a.n})"
        )
        print(
            "  checked: the checkpoint's signature; every entry's inclusion proof, signatures and admission;"
        )
        print(f"  the attestation's signature by service key {verified.signer}; and that rescoring")
        print("  the bundled evidence with the attested weights file gives every attested number")
        tampered_path = self.data_dir / f"attestation-{FEATURED}-tampered.json"
        old, new, tampered = tamper_total(data)
        tampered_path.write_bytes(tampered)
        try:
            verify_attestation(tampered, trusted)
        except TrustscoreError as exc:
            print(f"  tampered copy (total {old} -> {new}): verification failed: {exc.message}")
        else:
            raise VerificationError(f"a bundle whose total was changed from {old} to {new} still verified")
        vkey = shlex.quote(self.server.verifier_key)
        print(f"  check it yourself: trustscore rating verify {shlex.quote(str(path))} --verifier-key {vkey}")
        if not self.kept:
            print(
                "  (the temporary data directory is removed at the end; rerun with --keep to keep the file)"
            )


def covers(status: dict[str, Any], reports: set[int]) -> bool:
    """Whether an agent's re-verification history has a run of each of ``reports``. Not only of the
    latest: a run whose attempt failed is retried after the runs queued behind it, and until it is
    recorded the rating lacks what it found (the bluffer once ranked first that way)."""
    return reports <= {run["report_index"] for run in status["history"]}


def verify_attestation(data: bytes, trusted: note.Verifier) -> attestation.VerifiedBundle:
    """What ``trustscore rating verify BUNDLE --verifier-key KEY`` checks, with the default weights file."""
    bundle = attestation.decode_bundle(data)
    return attestation.verify_bundle(bundle, weights_for(None, bundle.weights_model), trusted)


def tamper_total(data: bytes) -> tuple[int | None, int, bytes]:
    """The bundle with its attested total changed (the signed payload edited, the signature kept)."""
    bundle = json.loads(data)
    payload = json.loads(b64decode(bundle["attestation"]["payload"], what="attestation payload"))
    old = payload["predicate"]["total"]
    new = 500 if old is None else (old + 100 if old <= 900 else old - 100)
    payload["predicate"]["total"] = new
    bundle["attestation"]["payload"] = b64encode(canonical.encode(payload))
    return old, new, json.dumps(bundle).encode()


def _interval(interval: Sequence[float] | None, digits: int) -> str:
    if interval is None:
        return "-"
    low, high = interval
    return f"[{low:.{digits}f}, {high:.{digits}f}]"
