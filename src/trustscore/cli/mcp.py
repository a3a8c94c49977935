"""``trustscore mcp``: the bureau's MCP server over stdio, reading a trustscore server's REST API.

For an MCP client such as Claude Desktop (docs/integrations.md): the client starts this command and
talks MCP on its standard input and output; the tools ask ``--server`` (or ``$TRUSTSCORE_SERVER``,
trustscore.cli.settings).
Nothing but protocol messages is written to standard output.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from trustscore.errors import InvalidInput


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser("mcp", help="serve the bureau's MCP tools over stdio")
    p.add_argument("--server", required=True, help="the trustscore server the tools read")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from trustscore.services.mcp_tools import HttpBureau, build_server  # the SDK loads only here

    if not str(args.server).startswith(("http://", "https://")):
        raise InvalidInput(f"--server must be an http(s) URL, got {str(args.server)[:80]!r}")
    bureau = HttpBureau(args.server)
    server = build_server(bureau)

    async def serve() -> None:
        try:
            await server.run_stdio_async()
        finally:
            await bureau.aclose()

    asyncio.run(serve())
    return 0
