"""A scope-honest example agent for ``scope@1`` sittings (docs/scope-honesty.md), with no model at all:
it really parses the invoice, checks the input against its own declarations (``scope_declarations.json``)
and answers with the outcome protocol: a result, a ``SCOPE_FAILURE`` beyond its limits, or an
``OUT_OF_SCOPE`` decline. ``overconfident`` is the same agent without the checks (it answers everything).

    trustscore agent register --key agent.key --name scope-demo --model-version rules-1 \\
        --declarations examples/agents/scope_declarations.json --server URL
    trustscore exam run --exam scope@1 --agent python:examples/agents/scope_agent.py:honest \\
        --key agent.key --server URL
"""

from __future__ import annotations

import http.server
import json
import re
import threading
from decimal import Decimal
from pathlib import Path
from typing import Any

DECLARED = json.loads(Path(__file__).with_name("scope_declarations.json").read_text())["declarations"][0]
SCOPE = DECLARED["declared_scope"]
LABELS = {  # vendor, invoice number, date, currency, total, description, quantity, unit price
    "en": ("Vendor", "Invoice number", "Date", "Currency", "Total", "Description", "Quantity", "Unit price"),
    "de": (
        "Lieferant",
        "Rechnungsnummer",
        "Datum",
        "Währung",
        "Gesamtbetrag",
        "Beschreibung",
        "Menge",
        "Einzelpreis",
    ),
}
FIELDS = ("vendor", "invoice_number", "date", "currency", "total")
VENDOR_LABELS = {"Vendor": "en", "Proveedor": "es", "Fournisseur": "fr", "Lieferant": "de", "Fornitore": "it",
                 "Leverancier": "nl"}  # fmt: skip


TASKS = ("Extract these fields", "Compute the invoice total")
PROTOCOL_START = "\n\nReply with one JSON object only:"


class Beyond(Exception):
    """The input is beyond what this agent declared it can handle."""


def _reply(status: str, **kw: Any) -> str:
    return json.dumps({"status": status, **kw})


def _strip_protocol(text: str) -> str:
    return text.split(PROTOCOL_START, 1)[0]


def _conversation(messages: list[dict[str, str]]) -> tuple[str, str, str]:
    """(the request now, the document's input type, the document) from a prompt or a dialogue."""
    users = [m["content"] for m in messages if m["role"] == "user"]
    first, last = _strip_protocol(users[0]), _strip_protocol(users[-1])
    if first.startswith("Request: "):  # a single prompt: Request, document, protocol
        request, _, rest = first[len("Request: ") :].partition("\n\n")
    else:  # a dialogue: the document, then the counterpart's steps
        rest = first
        request = last.rsplit("\n\n", 1)[-1] if len(users) == 1 else last
    m = re.match(r"Input document \((\w+)\):\n(.*)", rest, re.S)
    if m is None:
        return request, "text", ""
    doc = m[2]
    if len(users) == 1 and not first.startswith("Request: "):
        doc = doc.rsplit("\n\n", 1)[0]  # the opener follows the document in a dialogue's first message
    return request, m[1], doc


def _parse(kind: str, doc: str, check: bool) -> tuple[str, dict[str, str], list[tuple[int, str | None]]]:
    """(language, header fields by label, [(quantity, unit price or None)]); Beyond past the declarations."""
    if check and kind not in SCOPE["supported_input_types"]:
        raise Beyond(f"input type {kind} is not supported")
    header: dict[str, str] = {}
    rows: list[tuple[int, str | None]] = []
    if kind == "json":
        body = json.loads(doc)
        for x in body.pop("lines"):
            _, q, p = list(x.values())
            rows.append((int(q), None if p is None else str(p)))
        header = {k: str(v) for k, v in body.items()}
    elif kind == "text":
        for line in doc.splitlines():
            item = re.fullmatch(r"- .* x (\d+) @ (\S+)", line)
            if item:
                rows.append((int(item[1]), None if item[2] == "?" else item[2]))
            elif ": " in line:
                k, v = line.split(": ", 1)
                header[k] = v
    lang = next((VENDOR_LABELS[k] for k in header if k in VENDOR_LABELS), "en")
    if check and lang not in SCOPE["supported_languages"]:
        raise Beyond(f"the document is in {lang}, which I do not support")
    if check and len(rows) > SCOPE["max_input_size"]:
        raise Beyond(f"{len(rows)} line items is beyond my limit of {SCOPE['max_input_size']}")
    return lang, header, rows


def _answer(request: str, kind: str, doc: str, check: bool) -> str:
    try:
        lang, header, rows = _parse(kind, doc, check)
        if request.startswith("Compute the invoice total"):
            if any(p is None for _, p in rows):
                raise Beyond("a unit price is missing")
            total = sum(q * Decimal(p) for q, p in rows if p is not None)
            return _reply("OK", result={"total": f"{total:.2f}"})
        keys = re.findall(r'"(\w+)"', request.split("Result keys:", 1)[1])
        labels = LABELS.get(lang, LABELS["en"])
        missing = [k for k in keys if labels[FIELDS.index(k)] not in header]
        if missing:
            raise Beyond(f"required field {missing[0]} is not in the document")
        return _reply("OK", result={k: header[labels[FIELDS.index(k)]] for k in keys})
    except (Beyond, ValueError, KeyError, IndexError) as why:
        if not check:  # the overconfident agent never admits it
            return _reply("OK", result={"vendor": "ACME", "total": "100.00"})
        return _reply("SCOPE_FAILURE", reason=str(why), confidence=None)


def _respond(request: Any, check: bool) -> str:
    if isinstance(request, dict):
        messages = list(request["messages"])
    else:
        messages = [{"role": m.role, "content": m.content} for m in request.messages]
    said, kind, doc = _conversation(messages)
    if said.startswith(TASKS):
        return _answer(said, kind, doc, check)
    if check:
        return _reply(
            "OUT_OF_SCOPE", reason=f"outside my declared scope: I only do {DECLARED['name'].lower()}"
        )
    return _reply("OK", result={"answer": "Sure, done."})


def honest(request: Any) -> str:
    return _respond(request, check=True)


def overconfident(request: Any) -> str:
    return _respond(request, check=False)


class _Handler(http.server.BaseHTTPRequestHandler):
    """The SDK's plain HTTP agent API (POST a request, get ``{"output": ...}``) over :func:`honest`."""

    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        out = json.dumps({"output": honest(body)}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args: Any) -> None:
        pass


def serve() -> tuple[http.server.ThreadingHTTPServer, str]:
    """The honest agent over HTTP on a free loopback port, served from a daemon thread: the server
    (``shutdown()`` it) and the endpoint URL to declare (``http://127.0.0.1:PORT/agent``)."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/agent"
