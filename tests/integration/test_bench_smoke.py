"""Every benchmark script runs, at a tiny size, and prints its figures (issue #12: ``bench/grading.py``
broke silently after the scope merge because nothing ran it).

Each script runs as a person runs it (``python bench/NAME.py ...``, a child process) on a fresh database
of the test server, and must exit 0 and print the lines that carry its figures. No time is asserted: the
figures of a tiny run mean nothing, only that the script still measures something. A script added to
``bench/`` without a tiny run here fails ``test_every_bench_script_has_a_smoke_run``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import asyncpg
import pytest

from tests.conftest import REPO_ROOT

BENCH = REPO_ROOT / "bench"
NUMBER = r"[\d,.]+"

# script -> (its tiny run's arguments, {db} standing for an admin DSN; patterns its output must match)
#: A git checkout (CI tests a copy of the tracked files, which is not one).
IN_GIT = (Path(__file__).resolve().parents[2] / ".git").exists()
RUNS: dict[str, tuple[str, list[str]]] = {
    "scoring.py": (
        "--rows 2000 --agents 50 --sample 10 --repeat 1 --refresh-agents 40 --refresh-items 1,3"
        + (" --against HEAD" if IN_GIT else ""),  # --against reads the old engine from git
        [
            rf"baseline-v0\.3: full recompute .* {NUMBER} rows/s",
            r"^numpy \S+: NPY_DISABLE_CPU_FEATURES=",
            r"identical on the sample: True",
            rf"refresh baseline-v0\.3, 40 agents x 3 items .* full / refresh = {NUMBER}x and {NUMBER}x; identical: True",
            r"refresh trustscore-v2, 40 agents x 3 items .* identical: True",
            *(
                [rf"trustscore-v1: before \(HEAD\) .* before / after = {NUMBER}x; identical: True"]
                if IN_GIT
                else []
            ),
        ],
    ),
    "rating_refresh.py": (
        "--agents 30 --items 10 --future",
        [
            r"^models trustscore-v2, trustscore-v3, baseline-v0\.3: 30 agents x 10 items",  # v3 served
            r"^models trustscore-v2, baseline-v0\.3: 30 agents x 10 items",  # the default set
            r"^numpy \S+: NPY_DISABLE_CPU_FEATURES=",
            rf"1 h later, no new evidence\s+full recompute\s+{NUMBER} s\s+kept states\s+{NUMBER} s.*identical$",
            rf"^\s+engine {NUMBER}\s+to_ratings {NUMBER}\s+medals {NUMBER}\s+_prepare {NUMBER}\s+_apply {NUMBER}"
            rf"\s+_write {NUMBER} µs",
        ],
    ),
    "takeover.py": (
        "--agents 600 --items 3",
        [
            r"^600 agents x 3 items \(1,800 rows\), trustscore-v2, baseline-v0\.3$",
            rf"^\s+first refresh, published\s+{NUMBER} s, longest event-loop stall\s+{NUMBER} ms",
            rf"^\s+time refresh 1 h later, published\s+{NUMBER} s, longest event-loop stall\s+{NUMBER} ms",
        ],
    ),
    "mirror_sync.py": (
        "--agents 40 --items 2 --database-url {db}",
        [
            rf"^\s+mirror starting empty\s+120 rows\s+{NUMBER} s, longest event-loop stall\s+{NUMBER} ms",
            r"service: time refresh 1 h later, written .* longest event-loop stall",
            rf"^\s+after the 1 h time refresh\s+120 rows\s+{NUMBER} s, longest event-loop stall\s+{NUMBER} ms",
            r"the mirror serves what the service computed: True",
        ],
    ),
    "grading.py": (
        "--seconds 0.02 --exec-items 1",
        [
            rf"^execution\s+\S+\s+\d+\s+\d+\s+{NUMBER}$",
            rf"^exact\s+\S+\s+\d+\s+\d+\s+{NUMBER}$",
            r"^arithmetic@1\s+capability\s+\d+\s+\d+$",
        ],
    ),
    "fsck.py": (
        "--entries 20 --baseline 10 --database-url {db}",
        [
            rf"20 entries: fsck .* {NUMBER} entries/s, peak RSS .*clean\]",
            rf"ratio 2x entries: time {NUMBER}x",
        ],
    ),
    "proofs.py": (
        "--entries 50 --requests 10 --verify 3 --database-url {db}",
        [
            rf"GET /v1/log/proof/inclusion\s+{NUMBER}\s+{NUMBER}",
            r"verified 3 inclusion proofs .*: all valid",
            rf"proof from tiles, cold\s+{NUMBER}\s+{NUMBER}.*tiles fetched per proof",
            rf"proof from tiles, warm client p50 / API proof p50 = {NUMBER}x",
        ],
    ),
    "growth.py": (
        "--sizes 20000,50000 --ingest 1:100,1000:2000 --requests 200 --verify 10 --database-url {db}",
        [
            rf"filled {NUMBER} entries in {NUMBER} s \({NUMBER} entries/s\)",
            r"1000 synthetic entries projected to no rows",
            r"tree checked: all [\d,]+ stored nodes equal a rebuild from the 50,000 leaves, and every full "
            r"hash tile.s stored row repeats them",
            rf"^\s+50,000\s+{NUMBER}\s+{NUMBER}\s+{NUMBER}\s+{NUMBER} \(\s*{NUMBER} µs\)",
            rf"50,000: ingest batch 1 {NUMBER}x, ingest batch 1000 {NUMBER}x, proof p50 {NUMBER}x",
            r"verified 10 proofs at each size .*: all valid",
            r"proof cache warmed: \d+ full tiles loaded",
            rf"proof p50 < 1 ms at [\d,]+: tiles read on first use {NUMBER} ms .*warmed start {NUMBER} ms",
        ],
    ),
    "ingest.py": (
        "--entries 1:10,100:100 --concurrency 1:2,100:1 --verify-sample 10 --prefill 30 --database-url {db}",
        [
            r"pynacl verify/s",
            rf"batch 100: {NUMBER} entries/s end to end = {NUMBER} x",
            rf"server CPU per entry, batch 1 / batch 100: {NUMBER} / {NUMBER} µs = {NUMBER} x",
        ],
    ),
    "service.py": (
        "--agents 2 --sandboxed-reports 0 --in-flight 2 --connections 2 --duration 1 --warmup 0 --rounds 1 "
        "--load httpx --database-url {db}",
        [rf"without sandbox\s+2\s+\d+\s+\d+\s+{NUMBER}\s+{NUMBER}", rf"rating / healthz = {NUMBER}"],
    ),
    "rederive.py": (
        "--agents 2 --repeat 1 --database-url {db}",
        [
            r"^[1-9][\d,]* entries, [1-9][\d,]* evidence items, [1-9][\d,]* ladder rows$",
            rf"^\s+re-derivation at start-up\s+best {NUMBER} s .* {NUMBER} items/s$",
            rf"re-derivation / derivation alone = {NUMBER}x",
            r"identical to the server's projection: True$",
        ],
    ),
    "attestations.py": (
        "--entries 3,20 --requests 2 --mcp-verify --database-url {db}",
        [
            rf"^\s+3 bundle\s+200\s+{NUMBER}\s+{NUMBER}\s+{NUMBER}\s+{NUMBER}\s+{NUMBER}\s+{NUMBER}$",
            rf"^\s+20\s+vc\s+200\s+0\s+{NUMBER}",
            rf"^\s+20\s+{NUMBER}(\s+{NUMBER}){{3}}\s+\d+(\s+{NUMBER}){{2}}$",  # the MCP verification
        ],
    ),
    "leaderboard.py": (
        "--idle 20 --rated 2 --runs 3 --requests 2 --seconds 5 --database-url {db}",
        [
            r"^registered 20 idle agents",
            rf"^logged 3 runs for each rated agent in {NUMBER} s$",
            rf"^GET /v1/leaderboard\?limit=100, again\s+\d+\s+{NUMBER}\s+{NUMBER}\s+{NUMBER} ms$",
            rf"^GET /v1/agents/\{{idle\}}/rating\s+\d+\s+{NUMBER}",
            rf"^GET /v1/stats/outcomes, a new floor each\s+2\s+{NUMBER}\s+{NUMBER}\s+{NUMBER} ms$",
            rf"^GET /v1/search/agents\?q=ts1 \(every id\)\s+2\s+{NUMBER}\s+{NUMBER}\s+{NUMBER} ms$",
            rf"^GET /v1/search/agents\?q=agent, first after a restart\s+1\s+{NUMBER}\s+{NUMBER}\s+{NUMBER} ms$",
            rf"^ratio leaderboard p50 \(again\) / healthz p50: {NUMBER}x$",
        ],
    ),
    "scope_runs.py": (
        "--runs 1",
        [rf"server run over guarded HTTP: median {NUMBER} s", rf"ratio \(HTTP run / in-process\): {NUMBER}x"],
    ),
    "nonce_probe.py": (
        "--partitions 2,3 --calls 20 --rounds 1 --database-url {db}",
        [
            rf"^2 partitions of entries: backend CPU .* wall {NUMBER} -> {NUMBER} µs/call",
            rf"^3 partitions of entries: backend CPU .* wall {NUMBER} -> {NUMBER} µs/call",
        ],
    ),
    "roles_memory.py": (
        "--items 40 --agents 2 --threads 2 --database-url {db}",
        [
            rf"^api\s+RSS before {NUMBER} MiB, after 40 items {NUMBER} MiB",
            rf"ratio\s+api growth / worker growth: (-?{NUMBER}|nan)",
        ],
    ),
    "body_flood.py": (
        "--duration 1 --body-mib 1 --in-flight 1 --chunked --database-url {db}",
        [
            rf"^flood\s+healthz p50\s+{NUMBER} ms",
            rf"^flood: 1 MiB bodies \(chunked\), 1 in flight, {NUMBER} s: answers \{{",
            rf"^server CPU {NUMBER} s = {NUMBER} cores; healthz p50 {NUMBER}x the quiet one$",
        ],
    ),
    "webhooks.py": (
        "--agents 2 --events 6 --latency-events 2 --baseline-posts 10 --database-url {db}",
        [
            rf"latency\s+2 events, one at a time: p50 {NUMBER} ms",
            rf"ratio\s+delivered / bare receiver: {NUMBER}",
        ],
    ),
}


def test_every_bench_script_has_a_smoke_run() -> None:
    scripts = {p.name for p in BENCH.glob("*.py") if not p.name.startswith("_")}
    assert scripts == set(RUNS), f"give each bench script a tiny run in RUNS: {sorted(scripts ^ set(RUNS))}"


async def _bench_databases(admin_dsn: str, script: str) -> set[str]:
    """The databases this script creates on a server (``bench_<name>_...``)."""
    conn = await asyncpg.connect(admin_dsn)
    try:
        prefix = "bench_" + script.removesuffix(".py")
        rows = await conn.fetch("SELECT datname FROM pg_database WHERE starts_with(datname, $1)", prefix)
    finally:
        await conn.close()
    return {r["datname"] for r in rows}


@pytest.mark.bench
@pytest.mark.parametrize("script", sorted(RUNS))
async def test_bench_script_runs_at_a_tiny_size(script: str, admin_dsn: str, tmp_path: Path) -> None:
    args, patterns = RUNS[script]
    before = await _bench_databases(admin_dsn, script)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRUSTSCORE_")}
    r = subprocess.run(  # noqa: ASYNC221 - the child is the thing under test; nothing else runs meanwhile
        [sys.executable, str(BENCH / script), *args.replace("{db}", admin_dsn).split()],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=tmp_path,
        env=env,
    )
    out = r.stdout
    assert r.returncode == 0, out + r.stderr
    assert "Traceback" not in out + r.stderr
    for pattern in patterns:
        assert re.search(pattern, out, re.MULTILINE), f"{pattern!r} not in the output:\n{out}"
    # A bench on an external server leaves no database of its own behind (it created them fresh).
    created = await _bench_databases(admin_dsn, script) - before
    assert not created, created


@pytest.mark.bench
@pytest.mark.parametrize(
    ("args", "code", "says"),
    [
        ("--agents 0", 2, "--agents and --items must be at least 1"),
        ("--agents 2 --models nope", 2, "--models: cannot read weights file"),
        ("--agents 2 --database-url postgresql://postgres@127.0.0.1:1/x", 1, "error: no database:"),
    ],
)
def test_mirror_sync_refuses_bad_input_in_one_line(args: str, code: int, says: str, tmp_path: Path) -> None:
    refuses_in_one_line("mirror_sync.py", args, code, says, tmp_path)


@pytest.mark.bench
@pytest.mark.parametrize(
    ("args", "says"),
    [
        ("--entries 10,x", "--entries: not whole numbers: '10,x'"),
        ("--entries 0", "--entries needs sizes >= 1 and --requests >= 0"),
        ("--requests -1", "--entries needs sizes >= 1 and --requests >= 0"),
    ],
)
def test_attestations_bench_refuses_bad_input_in_one_line(args: str, says: str, tmp_path: Path) -> None:
    refuses_in_one_line("attestations.py", args, 2, says, tmp_path)


def refuses_in_one_line(script: str, args: str, code: int, says: str, tmp_path: Path) -> None:
    """``script`` run with ``args`` exits ``code`` with ``says`` on the last line of its errors."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRUSTSCORE_")}
    r = subprocess.run(
        [sys.executable, str(BENCH / script), *args.split()],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env=env,
    )
    assert r.returncode == code, r.stdout + r.stderr
    assert "Traceback" not in r.stderr and says in r.stderr.strip().splitlines()[-1], r.stderr
