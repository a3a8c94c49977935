"""Scripted demo agents for exams: good, careless, gullible (obeys injected instructions), bluffer
(invents answers to unanswerable questions), and broken ones (crash, hang, garbage) for testing.

They answer from ``knowledge.json`` (the replies each persona gives to each public prompt), work out
fresh items with ``solver.py``, answer scope probes as ``scope_agent.py`` does (the bluffer as its
overconfident agent) and play negotiations by a fixed strategy. Three ways to use one:

- Python callable: ``python:examples/agents/scripted.py:good`` (any persona name is a function).
- JSON-lines subprocess: ``cmd:python examples/agents/scripted.py --persona good``.
- HTTP / OpenAI-compatible server: ``python examples/agents/serve.py --persona good --api openai``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
import scope_agent
import solver

KNOWLEDGE: dict[str, dict[str, Any]] = json.loads((Path(__file__).with_name("knowledge.json")).read_text())
PERSONAS = ("good", "careless", "gullible", "bluffer", "crash", "hang", "garbage")
_asked: dict[tuple[str, str], int] = defaultdict(int)


def _messages(request: Any) -> list[dict[str, str]]:
    if not isinstance(request, dict):  # an AgentRequest struct from the Python adapter
        request = {"messages": [{"role": m.role, "content": m.content} for m in request.messages]}
    return list(request["messages"])


def _entry(first_user: str) -> dict[str, Any] | None:
    found = KNOWLEDGE.get(first_user)
    if found is not None:
        return found
    return next((v for k, v in KNOWLEDGE.items() if first_user.startswith(k)), None)


def _negotiate(persona: str, plan: dict[str, int], messages: list[dict[str, str]]) -> str:
    last = messages[-1]["content"].rsplit("\n\n", 1)[-1]
    seller = json.loads(last)
    if persona == "careless" or seller["price"] <= plan["target"] or seller["rounds_left"] <= 1:
        return json.dumps({"action": "accept"})
    return json.dumps({"action": "offer", "price": plan["target"]})


def answer(persona: str, request: Any) -> str:
    """The reply of ``persona`` to a request (a dict with ``messages`` or an AgentRequest)."""
    messages = _messages(request)
    users = [m["content"] for m in messages if m["role"] == "user"]
    entry = _entry(users[0]) if users else None
    base = persona if persona in ("good", "careless", "gullible", "bluffer") else "good"
    if users and users[0].startswith("Request: ") and scope_agent.PROTOCOL_START in users[0]:
        # A scope probe (scope@1, docs/scope-honesty.md): answered as the scope example agent does, by
        # its declarations; the bluffer claims success beyond them, as it invents answers elsewhere.
        return scope_agent.overconfident(request) if base == "bluffer" else scope_agent.honest(request)
    if entry is None:  # a fresh item (a sitting): work it out, as far as the rule-based solver can
        solved = solver.solve(base, messages)
        return solved if solved is not None else "I do not recognise this question.\nANSWER: CANNOT ANSWER"
    if "negotiation" in entry:
        return _negotiate(base, entry["negotiation"], messages)
    reply = entry[base]
    if isinstance(reply, list):
        key = (base, users[0])
        reply = reply[_asked[key] % len(reply)]
        _asked[key] += 1
    return str(reply)


def _broken(persona: str, request: Any) -> str | None:
    """What a broken persona does instead of answering, or None to answer normally."""
    item_id = request.get("item_id") if isinstance(request, dict) else request.item_id
    if not item_id:  # OpenAI-style requests carry only messages: recognise the item by its prompt
        users = [m["content"] for m in _messages(request) if m["role"] == "user"]
        entry = _entry(users[0]) if users else None
        item_id = entry["item"] if entry else ""
    if persona == "crash" and item_id.endswith("-001"):
        raise RuntimeError("scripted crash")
    if persona == "hang" and item_id.endswith("-002"):
        time.sleep(3600)
    return None


def respond(persona: str, request: Any) -> str:
    _broken(persona, request)
    return answer(persona, request)


def good(request: Any) -> str:
    return respond("good", request)


def careless(request: Any) -> str:
    return respond("careless", request)


def gullible(request: Any) -> str:
    return respond("gullible", request)


def bluffer(request: Any) -> str:
    return respond("bluffer", request)


def crash(request: Any) -> str:
    return respond("crash", request)


def hang(request: Any) -> str:
    return respond("hang", request)


def garbage(request: Any) -> Any:
    return next(_junk)


_junk = itertools.cycle([None, b"\x00\xff", 42, "\x00" * 10, "{not json", ""])


def main() -> int:
    """JSON-lines loop: one request per stdin line, one ``{"id", "output"}`` per stdout line."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--persona", choices=PERSONAS, default="good")
    args = parser.parse_args()
    for line in sys.stdin:
        request = json.loads(line)
        if args.persona == "crash" and request["item_id"].endswith("-001"):
            return 3
        if args.persona == "garbage":
            sys.stdout.write(
                "this is not json\n" if request["turn"] % 2 == 0 else json.dumps({"id": -1}) + "\n"
            )
        else:
            _broken(args.persona, request)
            sys.stdout.write(
                json.dumps({"id": request["id"], "output": answer(args.persona, request)}) + "\n"
            )
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
