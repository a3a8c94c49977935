"""Serve a scripted agent over HTTP on 127.0.0.1: the plain trustscore agent API or an
OpenAI-compatible ``POST /v1/chat/completions`` (a tiny stand-in for a model server).

    python examples/agents/serve.py --persona good --api openai --port 8011
    trustscore exam run --exam capability@1 --agent openai:good@http://127.0.0.1:8011/v1 ...

Prints ``listening on http://127.0.0.1:PORT`` once ready (``--port 0`` picks a free port).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
import scripted


def make_handler(persona: str, api: str) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _send(self, status: int, body: bytes, ctype: str = "application/json") -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            request = json.loads(self.rfile.read(length))
            if api == "openai" and self.path.rstrip("/") != "/v1/chat/completions":
                self._send(404, b'{"error": "not found"}')
                return
            if api == "openai":
                request = {"messages": request["messages"]}
            if persona == "garbage":
                self._send(200, b"<html>oops</html>", "text/html")
                return
            try:
                scripted._broken(persona, request)
                output = scripted.answer(persona, request)
            except RuntimeError:
                self._send(500, b'{"error": "crashed"}')
                return
            if api == "openai":
                body: dict[str, Any] = {
                    "id": "chatcmpl-scripted",
                    "object": "chat.completion",
                    "model": persona,
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": output},
                            "finish_reason": "stop",
                        }
                    ],
                }
            else:
                body = {"output": output}
            self._send(200, json.dumps(body).encode())

    return Handler


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--persona", choices=scripted.PERSONAS, default="good")
    parser.add_argument("--api", choices=("plain", "openai"), default="openai")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), make_handler(args.persona, args.api))
    server.daemon_threads = True
    print(f"listening on http://127.0.0.1:{server.server_address[1]}", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
