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
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, Literal, Protocol

import httpx
import msgspec

from trustscore.errors import InvalidInput, TrustscoreError

MAX_LINE = 4 * 1024 * 1024


class AgentFailure(TrustscoreError):
    """The agent did not produce a usable answer (recorded on the item, not raised to the user)."""

    code = "agent-failure"
    status = 502
    title = "Agent failed"


class Message(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    role: Literal["system", "user", "assistant"]
    content: str


class AgentRequest(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """One question to the agent: which exam and item, which turn, and the conversation so far."""

    exam: str
    item_id: str
    turn: int
    messages: list[Message]


class Agent(Protocol):
    label: str

    def ask(self, request: AgentRequest, timeout_s: float) -> str: ...

    def close(self) -> None: ...


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
    ``{"id": n, "output": "..."}`` per line on its stdout. Restarted after a crash or a timeout."""

    def __init__(self, argv: list[str], *, env: dict[str, str] | None = None, cwd: str | None = None) -> None:
        if not argv:
            raise InvalidInput("subprocess agent needs a command")
        self.argv = argv
        self.env = env
        self.cwd = cwd
        self.label = "cmd:" + shlex.join(argv)
        self._proc: subprocess.Popen[bytes] | None = None
        self._lines: queue.Queue[bytes | None] = queue.Queue()
        self._next_id = 0

    def _start(self) -> subprocess.Popen[bytes]:
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
            raise AgentFailure(f"cannot start {self.argv[0]}: {exc.strerror}") from exc
        lines: queue.Queue[bytes | None] = queue.Queue()
        assert proc.stdout is not None
        threading.Thread(target=_pump, args=(proc.stdout, lines), daemon=True).start()
        self._proc, self._lines = proc, lines
        return proc

    def ask(self, request: AgentRequest, timeout_s: float) -> str:
        proc = self._start()
        self._next_id += 1
        rid = self._next_id
        line = json.dumps({"id": rid, **msgspec.to_builtins(request)}) + "\n"
        try:
            assert proc.stdin is not None
            proc.stdin.write(line.encode())
            proc.stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            self._stop()
            raise AgentFailure(f"agent process is gone (exit status {proc.poll()})") from exc
        try:
            raw = self._lines.get(timeout=timeout_s)
        except queue.Empty as exc:
            self._stop()
            raise AgentFailure(f"no answer within {timeout_s:g} s; agent process killed") from exc
        if raw is None:
            status = proc.wait()
            self._stop()
            raise AgentFailure(f"agent process exited with status {status}")
        try:
            reply = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise AgentFailure(f"agent wrote a line that is not JSON: {raw[:80]!r}") from exc
        if not isinstance(reply, dict) or reply.get("id") != rid:
            raise AgentFailure(f"agent reply is not {{'id': {rid}, 'output': ...}}")
        return _text(reply.get("output"))

    def _stop(self) -> None:
        proc, self._proc = self._proc, None
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


def _pump(stream: IO[bytes], lines: queue.Queue[bytes | None]) -> None:
    try:
        for line in iter(lambda: stream.readline(MAX_LINE), b""):
            lines.put(line)
    except (OSError, ValueError):
        pass
    lines.put(None)


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
    try:
        resp = client.post(url, json=payload, timeout=timeout_s, headers=headers)
    except httpx.TimeoutException as exc:
        raise AgentFailure(f"no answer within {timeout_s:g} s") from exc
    except httpx.HTTPError as exc:
        raise AgentFailure(f"cannot reach agent at {url}: {exc}") from exc
    if resp.status_code != 200:
        raise AgentFailure(f"agent answered HTTP {resp.status_code}")
    try:
        return resp.json()
    except ValueError as exc:
        raise AgentFailure("agent answered something that is not JSON") from exc


def _load_callable(target: str) -> Callable[[AgentRequest], Any]:
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


def agent_from_spec(spec: str) -> Agent:
    """An adapter from a command-line spec (see docs/sdk.md):

    ``python:MODULE:FUNCTION`` or ``python:FILE.py:FUNCTION``; ``cmd:COMMAND LINE``; ``http:URL`` (or a
    bare ``http(s)://`` URL); ``openai:MODEL@BASE_URL``.
    """
    kind, _, rest = spec.partition(":")
    if kind == "python":
        return CallableAgent(_load_callable(rest), label=spec)
    if kind == "cmd":
        argv = shlex.split(rest)
        if not argv:
            raise InvalidInput("cmd: agent spec needs a command")
        return SubprocessAgent(argv)
    if kind in ("http", "https") and rest.startswith("//"):
        return HttpAgent(spec)
    if kind == "http" and rest.startswith(("http://", "https://")):
        return HttpAgent(rest)
    if kind == "openai":
        model, sep, base = rest.partition("@")
        if not sep or not model or not base.startswith(("http://", "https://")):
            raise InvalidInput(f"openai agent spec must be openai:MODEL@BASE_URL, got {spec!r}")
        return OpenAIAgent(base, model, api_key=os.environ.get("OPENAI_API_KEY"))
    raise InvalidInput(f"unknown agent spec {spec!r}: use python:, cmd:, http: or openai:")
