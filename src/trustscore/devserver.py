"""Local processes for the demo, the tests and the benchmarks: a real ``trustscore serve`` and the example
agents' HTTP servers, each in a subprocess on a real port, waited for until ready and always stopped.

One helper instead of three copies (``cli/demo.py``, the service tests' conftest and ``bench/_common.py``
each had their own): the same readiness wait, log file, verifier key and clean stop, including the
embedded PostgreSQL of a data directory served without ``--database-url``. See docs/demo.md.
"""

from __future__ import annotations

import os
import selectors
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

import httpx

from trustscore import resources
from trustscore.errors import InvalidInput, StorageError
from trustscore.store import embedded

AGENT_SERVER = resources.ROOT / "examples" / "agents" / "serve.py"
VERIFIER_LINE = "log verifier key: "
STOP_TIMEOUT = 30.0  # seconds a SIGTERM'd process gets before SIGKILL


def free_port() -> int:
    """A port nothing listens on right now (the OS picks it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def check_port_free(port: int) -> None:
    """Refuse a port something already listens on: a caller must talk to its own server, not another."""
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError as exc:
            raise InvalidInput(f"port {port} is not free on 127.0.0.1: {exc.strerror}") from exc


def last_line(path: Path) -> str:
    """The last non-blank line of a log file, for a one-line error."""
    text = path.read_text(errors="replace") if path.exists() else ""
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1].strip() if lines else "(no output)"


def stop_process(proc: subprocess.Popen[bytes], timeout: float = STOP_TIMEOUT) -> None:
    """SIGTERM, then SIGKILL after ``timeout`` seconds; returns once the process is gone."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()


@dataclass
class ServeProcess:
    """``trustscore serve`` in a subprocess: on ``database_url`` if given, else on the embedded PostgreSQL
    in ``data_dir/pg``, which :meth:`stop` also stops. Its output goes to ``log_path`` (default
    ``server.log`` beside ``data_dir``, so that a refused start creates nothing inside it). The process
    environment is ours without ``TRUSTSCORE_DATABASE_URL`` (the database is what we are told), plus ``env``.
    """

    data_dir: Path
    database_url: str | None = None
    port: int = field(default_factory=free_port)
    env: dict[str, str] = field(default_factory=dict)
    log_path: Path | None = None
    start_timeout: float = 120.0
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        return self.log_path or self.data_dir.parent / "server.log"

    @property
    def argv(self) -> list[str]:
        argv = [sys.executable, "-m", "trustscore.cli.main", "serve", "--port", str(self.port)]
        argv += ["--data-dir", str(self.data_dir)]
        return argv + (["--database-url", self.database_url] if self.database_url else [])

    def output(self) -> str:
        """Everything the server has written so far."""
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def start(self) -> ServeProcess:
        """Start the server and wait until ``/readyz`` answers 200 (its database is reachable); a server
        that exits first, or is not ready in ``start_timeout`` seconds, raises StorageError with its last
        log line."""
        env = {k: v for k, v in os.environ.items() if k != "TRUSTSCORE_DATABASE_URL"} | dict(self.env)
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(  # noqa: S603 - fixed argv: our interpreter and the serve command
                self.argv, env=env, stdout=log, stderr=subprocess.STDOUT
            )
        try:
            self._wait_ready(self.proc)
        except BaseException:
            self.stop()  # also on Ctrl-C: nothing is left running, the embedded database included
            raise
        return self

    def _wait_ready(self, proc: subprocess.Popen[bytes]) -> None:
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise StorageError(f"trustscore serve exited during start-up: {last_line(self.log)}")
            try:
                if httpx.get(self.url + "/readyz", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise StorageError(
            f"trustscore serve was not ready within {self.start_timeout:.0f} s (log: {self.log})"
        )

    def verifier_key(self) -> str:
        """The log verifier key as the server printed it at start-up."""
        for line in self.output().splitlines():
            if line.startswith(VERIFIER_LINE):
                return line.removeprefix(VERIFIER_LINE).strip()
        raise StorageError(f"trustscore serve did not print its log verifier key (log: {self.log})")

    def kill9(self) -> None:
        """SIGKILL, as a crash: the embedded PostgreSQL (if any) is left running, as after a real crash."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        """Stop the server (which stops its embedded PostgreSQL as it exits), then make sure of the latter."""
        if self.proc is not None:
            stop_process(self.proc)
        if self.database_url is None:
            embedded.stop(self.data_dir / "pg")

    def __enter__(self) -> ServeProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@dataclass
class AgentProcess:
    """``examples/agents/serve.py`` for one persona (the plain agent API by default), in a subprocess.

    ``port`` 0 lets the server pick a free one (no race); a fixed port lets a caller know the endpoint
    before the server starts (an endpoint that is down, then comes back). Its stderr goes to ``log_path``.
    """

    persona: str
    port: int = 0
    api: str = "plain"
    log_path: Path | None = None
    start_timeout: float = 15.0
    proc: subprocess.Popen[bytes] | None = None
    url: str = ""

    def __post_init__(self) -> None:
        if self.port:
            self.url = f"http://127.0.0.1:{self.port}"

    @property
    def endpoint(self) -> str:
        """The agent's plain-API endpoint, as a card declares it."""
        if not self.url:
            raise InvalidInput(f"the agent server for {self.persona} has no port yet: start it first")
        return self.url + "/agent"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self) -> AgentProcess:
        """Start it and read the ``listening on URL`` line it prints once ready."""
        argv = [sys.executable, str(AGENT_SERVER), "--persona", self.persona, "--api", self.api]
        argv += ["--port", str(self.port)]
        if self.log_path is None:
            self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE)  # noqa: S603 - fixed argv
        else:
            with self.log_path.open("ab") as log:
                self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=log)  # noqa: S603
        assert self.proc.stdout is not None
        with selectors.DefaultSelector() as sel:
            sel.register(self.proc.stdout, selectors.EVENT_READ)
            ready = sel.select(self.start_timeout)
        line = self.proc.stdout.readline().decode(errors="replace").strip() if ready else ""
        if not line.startswith("listening on http://"):
            exited = self.proc.poll() is not None
            self.stop()
            why = (
                last_line(self.log_path)
                if exited and self.log_path
                else f"not listening within {self.start_timeout:.0f} s"
            )
            raise StorageError(f"the example agent server for {self.persona} did not start: {why}")
        self.url = line.removeprefix("listening on ")
        return self

    def stop(self, timeout: float = 10.0) -> None:
        if self.proc is not None:
            stop_process(self.proc, timeout)
            self.proc = None

    def __enter__(self) -> AgentProcess:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
