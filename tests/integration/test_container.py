"""The container image (Containerfile, deploy/container/build.sh, docs/container.md), built and run here
with podman: the default command serves the embedded PostgreSQL as uid 10001 and answers from the host;
with ``--database-url`` it serves an external PostgreSQL and takes a signed card.

Opt-in (a build takes minutes): ``TRUSTSCORE_CONTAINER_TEST=1``. Skipped with the reason otherwise, and
when podman is not installed.
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import msgspec
import pytest

from tests.helpers import new_card
from trustscore.devserver import free_port
from trustscore.ledger import dsse

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "deploy" / "container" / "build.sh"
SECCOMP = ROOT / "deploy" / "container" / "seccomp.py"
IMAGE = "localhost/trustscore:test"
UID = "10001"
RUNTIME = os.environ.get("TRUSTSCORE_CONTAINER_RUNTIME", "runc")
# What `podman run` needs on this host (docs/container.md): runc, and limits it is allowed to set.
RUN = ["podman", "--runtime", RUNTIME, "run", "--detach", "--ulimit", "nofile=4096:4096"]
RUN += ["--ulimit", "nproc=4096:4096"]
START_TIMEOUT = 120.0  # seconds: initdb of the embedded PostgreSQL on a busy 2-core machine

if os.environ.get("TRUSTSCORE_CONTAINER_TEST") != "1":
    pytest.skip(
        "container image test is opt-in (a podman build takes minutes): set TRUSTSCORE_CONTAINER_TEST=1",
        allow_module_level=True,
    )
if shutil.which("podman") is None:
    pytest.skip("podman is not installed (apt-get install podman runc debootstrap)", allow_module_level=True)

pytestmark = pytest.mark.timeout(1800)


def podman(*args: str, check: bool = True) -> str:
    r = subprocess.run(["podman", "--runtime", RUNTIME, *args], capture_output=True, text=True)
    if check:
        assert r.returncode == 0, f"podman {' '.join(args)}: {r.stdout}{r.stderr}"
    return r.stdout


@pytest.fixture(scope="module")
def image() -> str:
    """The image, built by the script the docs name (the base and unchanged layers come from the cache)."""
    r = subprocess.run([str(BUILD), IMAGE], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr[-4000:]
    return IMAGE


class Containers:
    """Containers (and named volumes) a test starts, all removed afterwards."""

    def __init__(self, image: str) -> None:
        self.image = image
        self.names: list[str] = []
        self.volumes: list[str] = []

    def volume(self) -> str:
        name = f"trustscore-test-{os.getpid()}-{time.monotonic_ns()}"
        self.volumes.append(name)
        return name

    def run(self, *options: str, command: tuple[str, ...] = ()) -> str:
        """``podman run --detach OPTIONS IMAGE COMMAND``; returns the container's name."""
        name = f"trustscore-test-{os.getpid()}-{time.monotonic_ns()}"
        self.names.append(name)
        r = subprocess.run(
            [*RUN, "--name", name, *options, self.image, *command], capture_output=True, text=True
        )
        assert r.returncode == 0, r.stdout + r.stderr
        return name

    def close(self) -> None:
        for name in self.names:
            podman("rm", "--force", "--ignore", name, check=False)
        for volume in self.volumes:
            podman("volume", "rm", "--force", volume, check=False)


@pytest.fixture
def containers(image: str) -> Iterator[Containers]:
    c = Containers(image)
    try:
        yield c
    finally:
        c.close()


@pytest.fixture
def sandbox_profile(tmp_path: Path) -> Path:
    """The seccomp profile deploy/container/seccomp.py writes from podman's default."""
    profile = tmp_path / "seccomp.json"
    with profile.open("w") as out:
        subprocess.run([sys.executable, str(SECCOMP)], stdout=out, check=True)
    return profile


def stopped_cleanly(name: str) -> None:
    """``podman stop`` sends SIGTERM: the service stops its embedded PostgreSQL and exits 0."""
    podman("stop", "--time", "60", name)
    assert podman("inspect", "--format", "{{.State.ExitCode}}", name).strip() == "0", podman("logs", name)


def verifier_key(name: str) -> str:
    [line] = [x for x in podman("logs", name).splitlines() if x.startswith("log verifier key: ")]
    return line


def wait_healthy(name: str, base: str) -> httpx.Response:
    """``/healthz`` once the service answers; fails with the container's log if it exits or never does."""
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        try:
            r = httpx.get(f"{base}/healthz", timeout=5)
            if r.status_code == 200:
                return r
        except httpx.TransportError:
            pass
        if podman("inspect", "--format", "{{.State.Running}}", name).strip() != "true":
            break
        time.sleep(1)
    raise AssertionError(f"{name} never answered /healthz:\n{podman('logs', name, check=False)}")


def log_size(base: str) -> int:
    """The size of the server's signed checkpoint, once it has one holding its two service cards."""
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        r = httpx.get(f"{base}/v1/log/checkpoint", timeout=10)
        if r.status_code == 200 and int(r.text.splitlines()[1]) >= 2:
            return int(r.text.splitlines()[1])
        time.sleep(0.5)
    raise AssertionError(f"no checkpoint with the service cards at {base}")


def uids_and_commands(name: str) -> list[tuple[str, str]]:
    """(real uid, command) of every process in the container, read from its /proc."""
    script = (
        "import glob, json\n"
        "found = []\n"
        "for d in glob.glob('/proc/[0-9]*'):\n"
        "    try:\n"
        "        uid = [l.split()[1] for l in open(d + '/status') if l.startswith('Uid:')][0]\n"
        "        found.append([uid, open(d + '/cmdline', 'rb').read().decode(errors='replace')])\n"
        "    except OSError:\n"
        "        pass\n"
        "print(json.dumps(found))\n"
    )
    found = msgspec.json.decode(podman("exec", name, "python3", "-c", script), type=list[tuple[str, str]])
    assert found, "no process seen"
    return found


def test_default_command_serves_the_embedded_database_as_non_root(containers: Containers) -> None:
    port = free_port()
    data = containers.volume()
    publish = ("--publish", f"127.0.0.1:{port}:8080", "--volume", f"{data}:/data")
    name = containers.run(*publish)  # the image's own CMD: serve on 0.0.0.0:8080, data in /data
    base = f"http://127.0.0.1:{port}"
    assert wait_healthy(name, base).text.strip() == "ok"
    ready = httpx.get(f"{base}/readyz", timeout=10)
    assert ready.status_code == 200 and ready.text.splitlines()[0] == "ready", ready.text
    # podman's default seccomp profile refuses the namespaces the code sandbox needs: code items are
    # refused (never graded with less isolation), and /readyz says so.
    assert ready.text.splitlines()[1].startswith("sandbox: refused"), ready.text

    assert podman("exec", name, "id", "-u").strip() == UID
    processes = uids_and_commands(name)
    assert {uid for uid, _ in processes} == {UID}, processes
    assert any("postgres" in cmd for _, cmd in processes), processes  # the embedded server, as 10001
    owner = podman("exec", name, "stat", "-c", "%u %a", "/data/pg").split()
    assert owner == [UID, "700"], owner
    size = log_size(base)
    first_key = verifier_key(name)
    stopped_cleanly(name)

    # A new container on the same volume serves the same log: same key, same checkpoint size or more.
    again = containers.run(*publish)
    wait_healthy(again, base)
    assert verifier_key(again) == first_key
    assert log_size(base) >= size
    stopped_cleanly(again)


@pytest.mark.skipif(
    not os.environ.get("TRUSTSCORE_TEST_DATABASE_URL"),
    reason="needs an external PostgreSQL reachable from the host: set TRUSTSCORE_TEST_DATABASE_URL",
)
async def test_external_database_takes_a_signed_card(
    containers: Containers, dsn: str, sandbox_profile: Path
) -> None:
    port = free_port()
    # Host network: the container reaches the PostgreSQL the host does. The sandbox's seccomp profile
    # (podman's default plus sethostname) lets the code sandbox make its namespaces (docs/container.md).
    command = (
        "serve",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--data-dir",
        "/data",
        "--database-url",
        dsn,
    )
    name = containers.run(
        "--network", "host", "--security-opt", f"seccomp={sandbox_profile}", command=command
    )
    base = f"http://127.0.0.1:{port}"
    wait_healthy(name, base)
    podman("exec", name, "test", "!", "-e", "/data/pg")  # no embedded database was made
    key, env = new_card("container-agent", endpoint="http://127.0.0.1:9/agent")
    async with httpx.AsyncClient(base_url=base, timeout=30) as client:
        ready = await client.get("/readyz")
        assert ready.status_code == 200 and ready.text.splitlines()[1].startswith("sandbox: kernel"), (
            ready.text
        )
        r = await client.post("/v1/log/entries", content=msgspec.json.encode(env))
        assert r.status_code == 201, r.text
        [entry] = r.json()["entries"]
        i = entry["index"]
        leaf = (await client.get("/v1/log/entries", params={"start": i, "end": i + 1})).json()["entries"][0]
        assert base64.b64decode(leaf["leaf"]) == dsse.leaf_bytes(env)
        agent = await client.get(f"/v1/agents/{key.id}")
    assert agent.status_code == 200, agent.text
    assert agent.json()["name"] == "container-agent" and agent.json()["card_index"] == i
