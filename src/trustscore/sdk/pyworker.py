"""Child side of the ``python:`` adapter: ``python -m trustscore.sdk.pyworker MODULE_OR_FILE:FUNCTION``.

Speaks the ``cmd:`` JSON-lines protocol on the stdin/stdout it was started with, after a
``{"ready": ...}`` handshake. The agent's own prints go to stderr and its stdin is empty, so it can
neither corrupt nor consume the protocol. A hard exit
or crash of the agent ends only this process; the parent fails the item and restarts it.
"""

from __future__ import annotations

import json
import os
import sys
from typing import IO, Any

import msgspec

from trustscore.errors import TrustscoreError
from trustscore.sdk.adapters import AgentRequest, load_callable


def _send(out: IO[str], value: dict[str, Any]) -> None:
    out.write(json.dumps(value) + "\n")
    out.flush()


def _answer(fn: Any, line: str) -> dict[str, Any]:
    try:
        raw = json.loads(line)
        rid = raw.pop("id")
        request = msgspec.convert(raw, AgentRequest)
    except (ValueError, KeyError, TypeError, AttributeError, msgspec.ValidationError) as exc:
        return {"id": None, "error": f"bad request line: {exc}"}
    try:
        output = fn(request)
    except BaseException as exc:
        return {"id": rid, "error": f"agent raised {type(exc).__name__}: {str(exc)[:200]}"}
    if not isinstance(output, str):
        return {"id": rid, "error": f"agent answered {type(output).__name__}, not text"}
    return {"id": rid, "output": output}


def main(argv: list[str]) -> int:
    requests = os.fdopen(os.dup(0), "r", encoding="utf-8")
    protocol = os.fdopen(os.dup(1), "w", encoding="utf-8")
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)  # an agent that reads stdin (input()) gets EOF, not the next request
    os.close(devnull)
    os.dup2(2, 1)  # the agent's prints (and any C-level writes to fd 1) go to stderr
    sys.stdin = open(os.devnull, encoding="utf-8")  # noqa: SIM115 - lives as long as the process
    sys.stdout = sys.stderr
    try:
        fn = load_callable(argv[0])
    except BaseException as exc:
        message = exc.message if isinstance(exc, TrustscoreError) else f"{type(exc).__name__}: {exc}"
        _send(protocol, {"ready": False, "error": " ".join(str(message).split())[:300]})
        return 2
    _send(protocol, {"ready": True})
    for line in requests:
        _send(protocol, _answer(fn, line))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
