"""Adapters that put a question to the agent under test and return its answer as text.

Every adapter takes an :class:`AgentRequest` (the conversation so far) and a timeout, and returns the
agent's reply or raises :class:`AgentFailure` (timeout, crash, unusable answer). The runner records a
failure as a failed item; it never ends the run. Wire formats are documented in docs/sdk.md.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import json
import os
import queue
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import httpx
import msgspec

from trustscore.errors import InvalidInput
from trustscore.sdk.agent_api import Agent, AgentFailure, AgentRequest, AgentUnreachable, Message

MAX_LINE = 4 * 1024 * 1024
MAX_BODY = MAX_LINE  # bytes of an HTTP agent's answer read before the item fails
MAX_SKIPPED_LINES = 1000  # lines per ask that are not the reply before the item fails
QUEUED_LINES = 16  # lines read ahead from a subprocess agent (at most MAX_LINE each)
HANDSHAKE_S = 60.0  # time a python: agent has to import its module

__all__ = ["Agent", "AgentFailure", "AgentRequest", "AgentUnreachable", "Message"]  # from agent_api


class CallableAgent:
    """A Python callable ``(AgentRequest) -> str``, run in a daemon thread so a hang can time out.

    A hung call cannot be killed (Python threads cannot be); it is abandoned and the item fails.
    """

    def __init__(self, fn: Callable[[AgentRequest], Any], label: str = "python") -> None:
        self.fn = fn
        self.label = label

    def ask(self, request: AgentRequest, timeout_s: float) -> str:
        box: dict[str, Any] = {}

        def call() -> None:
            try:
                box["value"] = self.fn(request)
            except BaseException as exc:
                box["error"] = exc

        t = threading.Thread(target=call, daemon=True, name=f"agent-{request.item_id}")
        t.start()
        t.join(timeout_s)
        if t.is_alive():
            raise AgentFailure(f"no answer within {timeout_s:g} s")
        if "error" in box:
            exc = box["error"]
            raise AgentFailure(f"agent raised {type(exc).__name__}: {str(exc)[:200]}")
        return _text(box.get("value"))

    def close(self) -> None:
        pass


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise AgentFailure(f"agent answered {type(value).__name__}, not text")
    return value


class SubprocessAgent:
    """A long-running process speaking JSON lines: one request object per line on its stdin, one
    ``{"id": n, "output": "..."}`` (or ``{"id": n, "error": "why"}``) per line on its stdout.

    Each request carries a fresh id; lines that are not the reply to it (log lines, stale replies to a
    timed-out request) are skipped, up to :data:`MAX_SKIPPED_LINES` per ask, so one stray line costs
    nothing. A timeout, a crash or too many stray lines fails that item only: the process (its whole
    process group) is killed and restarted for the next one.

    With ``handshake=True`` the process must first write ``{"ready": true}`` (or ``{"ready": false,
    "error": "why"}``) within :data:`HANDSHAKE_S`; the ``python:`` adapter's worker does.
    """

    def __init__(
        self,
        argv: list[str],
        *,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        label: str | None = None,
        handshake: bool = False,
    ) -> None:
        if not argv:
            raise InvalidInput("subprocess agent needs a command")
        self.argv = argv
        self.env = env
        self.cwd = cwd
        self.label = label or "cmd:" + shlex.join(argv)
        self.handshake = handshake
        self._proc: subprocess.Popen[bytes] | None = None
        self._lines: queue.Queue[bytes | None] = queue.Queue(maxsize=QUEUED_LINES)
        self._stopped = threading.Event()
        self._next_id = 0

    def start(self) -> subprocess.Popen[bytes]:
        """The running agent process, started (and handshaken) if it is not running."""
        if self._proc is not None and self._proc.poll() is None:
            return self._proc
        self._stop()
        try:
            proc = subprocess.Popen(  # noqa: S603 - the user's own agent command
                self.argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=self.env,
                cwd=self.cwd,
                start_new_session=True,
            )
        except OSError as exc:
            raise AgentUnreachable(f"cannot start {self.argv[0]}: {exc.strerror}") from exc
        lines: queue.Queue[bytes | None] = queue.Queue(maxsize=QUEUED_LINES)
        stopped = threading.Event()
        assert proc.stdout is not None
        threading.Thread(target=_pump, args=(proc.stdout, lines, stopped), daemon=True).start()
        self._proc, self._lines, self._stopped = proc, lines, stopped
        if self.handshake:
            self._handshake(proc)
        return proc

    def _handshake(self, proc: subprocess.Popen[bytes]) -> None:
        try:
            raw = self._lines.get(timeout=HANDSHAKE_S)
        except queue.Empty:
            self._stop()
            raise AgentUnreachable(f"agent did not start within {HANDSHAKE_S:g} s") from None
        if raw is None:
            raise AgentUnreachable(f"agent process {self._ended(proc, 1.0)} while loading")
        hello = _json_object(raw)
        if hello is None or hello.get("ready") is not True:
            self._stop()
            why = hello.get("error") if hello is not None else None
            raise AgentUnreachable(str(why) if isinstance(why, str) else f"agent did not start: {raw[:80]!r}")

    def ask(self, request: AgentRequest, timeout_s: float) -> str:
        proc = self.start()
        self._next_id += 1
        rid = self._next_id
        line = json.dumps({"id": rid, **msgspec.to_builtins(request)}) + "\n"
        try:
            assert proc.stdin is not None
            proc.stdin.write(line.encode())
            proc.stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            status = proc.poll()
            self._stop()
            raise AgentFailure(f"agent process is gone (exit status {status})") from exc
        reply = self._reply_to(rid, proc, timeout_s)
        error = reply.get("error")
        if isinstance(error, str):
            raise AgentFailure(" ".join(error.split())[:300])
        return _text(reply.get("output"))

    def _reply_to(self, rid: int, proc: subprocess.Popen[bytes], timeout_s: float) -> dict[str, Any]:
        """The reply line for request ``rid``, skipping other lines up to the bound and the deadline."""
        deadline = time.monotonic() + timeout_s
        skipped = _Skipped()
        while True:
            remaining = deadline - time.monotonic()
            try:
                if remaining <= 0:
                    raise queue.Empty
                raw = self._lines.get(timeout=remaining)
            except queue.Empty:
                self._stop()
                raise AgentFailure(
                    f"no answer within {timeout_s:g} s; agent process killed{skipped}"
                ) from None
            if raw is None:
                raise AgentFailure(f"agent process {self._ended(proc, remaining)}{skipped}")
            reply = _json_object(raw)
            if reply is not None and reply.get("id") == rid:
                return reply
            skipped.add(raw)
            if skipped.count > MAX_SKIPPED_LINES:
                self._stop()
                raise AgentFailure(
                    f"agent wrote more than {MAX_SKIPPED_LINES} lines that are not the reply to request "
                    f"{rid}; agent process killed{skipped}"
                )

    def _ended(self, proc: subprocess.Popen[bytes], grace_s: float) -> str:
        """Why the agent's output ended: its exit status, or (if it closed stdout and lives on) that."""
        try:
            status = proc.wait(timeout=max(grace_s, 0.1))
        except subprocess.TimeoutExpired:
            self._stop()
            return "closed its output; killed"
        self._stop()
        return _exit_reason(status)

    def _stop(self) -> None:
        proc, self._proc = self._proc, None
        self._stopped.set()
        if proc is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        for stream in (proc.stdin, proc.stdout):
            with contextlib.suppress(OSError):
                if stream is not None:
                    stream.close()
        proc.wait()

    def close(self) -> None:
        self._stop()


def _json_object(raw: bytes) -> dict[str, Any] | None:
    """A line as a JSON object; invalid UTF-8 reads as U+FFFD (the reply is still the reply)."""
    try:
        value = json.loads(raw.decode("utf-8", "replace"))
    except (json.JSONDecodeError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _exit_reason(status: int) -> str:
    if status < 0:
        try:
            name = signal.Signals(-status).name
        except ValueError:
            name = str(-status)
        return f"was killed by signal {name}"
    return f"exited with status {status}"


class _Skipped:
    """How many lines were skipped while waiting for a reply, and the first of them (for the reason)."""

    def __init__(self) -> None:
        self.count = 0
        self.first = b""

    def add(self, raw: bytes) -> None:
        if not self.count:
            self.first = raw[:60]
        self.count += 1

    def __str__(self) -> str:
        if not self.count:
            return ""
        return f" (skipped {self.count} line(s) that were not the reply, first {self.first!r})"


def _pump(stream: IO[bytes], lines: queue.Queue[bytes | None], stopped: threading.Event) -> None:
    """Move lines from the agent's stdout to ``lines`` (bounded: a flood blocks the agent, not memory)."""

    def put(item: bytes | None) -> bool:
        while not stopped.is_set():
            try:
                lines.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    try:
        for line in iter(lambda: stream.readline(MAX_LINE), b""):
            if not put(line):
                return
    except (OSError, ValueError):
        pass
    put(None)


class PythonAgent(SubprocessAgent):
    """A Python callable ``fn(AgentRequest) -> str`` run in a child process
    (``python -m trustscore.sdk.pyworker TARGET``), so an agent that hangs, calls ``os._exit`` or
    segfaults fails its item instead of taking the CLI with it. The callable's prints go to stderr,
    never into the protocol. Loading errors are reported when the adapter is created."""

    def __init__(self, target: str, *, label: str | None = None, env: dict[str, str] | None = None) -> None:
        super().__init__(
            [sys.executable, "-m", "trustscore.sdk.pyworker", target],
            env=env,
            label=label or f"python:{target}",
            handshake=True,
        )
        try:
            self.start()
        except AgentFailure as exc:
            raise InvalidInput(f"python agent {target}: {exc.message}") from exc


class HttpAgent:
    """A plain HTTP endpoint: POST the request JSON, get ``{"output": "..."}`` back."""

    def __init__(self, url: str, *, client: httpx.Client | None = None) -> None:
        self.url = url
        self.label = f"http:{url}"
        self._client = client or httpx.Client()

    def ask(self, request: AgentRequest, timeout_s: float) -> str:
        body = _post(self._client, self.url, msgspec.to_builtins(request), timeout_s, {})
        if not isinstance(body, dict):
            raise AgentFailure("agent answered JSON that is not an object")
        return _text(body.get("output"))

    def close(self) -> None:
        self._client.close()


class OpenAIAgent:
    """An OpenAI-compatible chat-completions endpoint (``{base_url}/chat/completions``) and model.

    The API key, if any, comes from ``OPENAI_API_KEY`` and is never written to the report.
    """

    def __init__(self, base_url: str, model: str, *, api_key: str | None = None) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.label = f"openai:{model}@{base_url}"
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client()

    def ask(self, request: AgentRequest, timeout_s: float) -> str:
        payload = {
            "model": self.model,
            "messages": [msgspec.to_builtins(m) for m in request.messages],
            "temperature": 0,
        }
        body = _post(self._client, self.url, payload, timeout_s, self._headers)
        try:
            content = body["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError) as exc:
            raise AgentFailure("chat completion has no choices[0].message.content") from exc
        return _text(content)

    def close(self) -> None:
        self._client.close()


def _post(client: httpx.Client, url: str, payload: Any, timeout_s: float, headers: dict[str, str]) -> Any:
    """POST and decode the JSON answer, within ``timeout_s`` in total (httpx's own timeout is per read,
    so a server dripping a byte at a time is cut off here) and at most :data:`MAX_BODY` bytes."""
    deadline = time.monotonic() + timeout_s
    try:
        with client.stream("POST", url, json=payload, timeout=timeout_s, headers=headers) as resp:
            if resp.status_code != 200:
                raise AgentFailure(f"agent answered HTTP {resp.status_code}")
            body = bytearray()
            for chunk in resp.iter_bytes():
                body += chunk
                if len(body) > MAX_BODY:
                    raise AgentFailure(f"agent's answer is larger than {MAX_BODY} bytes")
                if time.monotonic() > deadline:
                    raise AgentFailure(f"no answer within {timeout_s:g} s")
    except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
        raise AgentUnreachable(f"cannot reach agent at {url}: {' '.join(str(exc).split())}") from exc
    except httpx.TimeoutException as exc:
        raise AgentFailure(f"no answer within {timeout_s:g} s") from exc
    except httpx.HTTPError as exc:
        raise AgentFailure(f"cannot reach agent at {url}: {exc}") from exc
    try:
        return json.loads(bytes(body).decode("utf-8", "replace"))
    except (ValueError, RecursionError) as exc:
        raise AgentFailure("agent answered something that is not JSON") from exc


def load_callable(target: str) -> Callable[[AgentRequest], Any]:
    """The callable named by ``MODULE:FUNCTION`` or ``FILE.py:FUNCTION`` (imports it: runs its code)."""
    module_ref, _, attr = target.rpartition(":")
    if not module_ref or not attr:
        raise InvalidInput(f"python agent spec must be python:MODULE_OR_FILE:FUNCTION, got {target!r}")
    if module_ref.endswith(".py"):
        path = Path(module_ref)
        spec = importlib.util.spec_from_file_location(path.stem, path)
        if spec is None or spec.loader is None or not path.is_file():
            raise InvalidInput(f"cannot load agent file {path}")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    else:
        try:
            module = importlib.import_module(module_ref)
        except ImportError as exc:
            raise InvalidInput(f"cannot import agent module {module_ref!r}: {exc}") from exc
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise InvalidInput(f"{module_ref} has no callable {attr!r}")
    return fn  # type: ignore[no-any-return]


def agent_from_spec(spec: str, env: dict[str, str] | None = None) -> Agent:
    """An adapter from a command-line spec (see docs/sdk.md):

    ``python:MODULE:FUNCTION`` or ``python:FILE.py:FUNCTION``; ``cmd:COMMAND LINE``; ``http:URL`` (or a
    bare ``http(s)://`` URL); ``a2a:URL`` (an A2A agent, docs/integrations.md); ``openai:MODEL@BASE_URL``.
    A ``python:`` or ``cmd:`` agent's process runs with ``env`` (default: this process's environment).
    """
    kind, _, rest = spec.partition(":")
    if kind == "python":
        module_ref, _, attr = rest.rpartition(":")
        if not module_ref or not attr:
            raise InvalidInput(f"python agent spec must be python:MODULE_OR_FILE:FUNCTION, got {rest!r}")
        return PythonAgent(rest, label=spec, env=env)
    if kind == "cmd":
        argv = shlex.split(rest)
        if not argv:
            raise InvalidInput("cmd: agent spec needs a command")
        return SubprocessAgent(argv, env=env)
    if kind in ("http", "https") and rest.startswith("//"):
        return HttpAgent(spec)
    if kind == "http" and rest.startswith(("http://", "https://")):
        return HttpAgent(rest)
    if kind == "a2a":
        from trustscore.sdk.a2a_agent import A2AAgent  # imports the A2A SDK only when asked for

        return A2AAgent(spec)
    if kind == "openai":
        model, sep, base = rest.partition("@")
        if not sep or not model or not base.startswith(("http://", "https://")):
            raise InvalidInput(f"openai agent spec must be openai:MODEL@BASE_URL, got {spec!r}")
        return OpenAIAgent(base, model, api_key=os.environ.get("OPENAI_API_KEY"))
    raise InvalidInput(f"unknown agent spec {spec!r}: use python:, cmd:, http:, a2a: or openai:")
