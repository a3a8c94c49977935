"""A real HTTP webhook receiver on a loopback port: verifies every delivery, and can be down."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from trustscore.webhooks import signing


@dataclass
class Receipt:
    id: str  # the event's
    type: str
    agent: str
    body: dict[str, Any]
    at: float  # time.time() when received
    headers: dict[str, str]  # as delivered


@dataclass
class Receiver:
    """Answers 204 to a delivery whose ``v1a`` signature verifies with ``public_key`` (a ``whpk_`` text),
    400 to one that does not, and 503 while ``down``; keeps each accepted ``webhook-id`` once (idempotent
    by id: an event's id and the subscription it was delivered to, ``signing.message_id``)."""

    public_key: str = ""
    down: bool = False
    status_when_down: int = 503
    accepted: dict[str, Receipt] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)  # ids in the order first accepted
    repeats: int = 0  # deliveries of an id already accepted
    refused: int = 0  # deliveries while down
    bad: list[str] = field(default_factory=list)  # signature failures
    aborted: int = 0  # requests whose body ended early (the sender was killed while writing it)
    lock: threading.Lock = field(default_factory=threading.Lock)
    server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def start(self, port: int = 0) -> Receiver:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", "0"))
                body = self.rfile.read(length)
                if len(body) < length:  # the sender went away mid-request (killed): no delivery to judge
                    with outer.lock:
                        outer.aborted += 1
                    self.close_connection = True
                    return
                self.send_response(outer.handle(dict(self.headers.items()), body))
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()

    def handle(self, headers: dict[str, str], body: bytes) -> int:
        with self.lock:
            if self.down:
                self.refused += 1
                return self.status_when_down
            try:
                msg_id = signing.verify(
                    signing.parse_public_key(self.public_key), headers, body, int(time.time())
                )
            except Exception as exc:
                self.bad.append(str(exc))
                return 400
            if msg_id in self.accepted:
                self.repeats += 1
                return 204
            event = json.loads(body)
            assert msg_id.startswith(event["data"]["id"] + "_s")
            self.accepted[msg_id] = Receipt(
                event["data"]["id"], event["type"], event["data"]["agent"], event, time.time(), headers
            )
            self.order.append(msg_id)
            return 204

    def per_agent(self) -> dict[str, list[int]]:
        """Log indexes of the accepted events, per agent, in the order they arrived."""
        out: dict[str, list[int]] = {}
        for i in self.order:
            r = self.accepted[i]
            out.setdefault(r.agent, []).append(r.body["data"]["log_index"])
        return out
