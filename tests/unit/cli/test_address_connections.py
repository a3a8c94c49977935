"""uvicorn with the service's protocol bounds the connections one client address holds open at once
(TRUSTSCORE_ADDRESS_CONNECTIONS). The header, body and answer clocks bound how long each connection may
idle, but one address could open as many as it liked at once (300 held in the session-16 fuzzing), each
costing the server a socket, buffers and a parser. Past the bound a new connection is closed at once;
connections that end free their places."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.uvicorn_served import served
from trustscore.cli.http_protocol import OneWriteHttpToolsProtocol, per_address

LIMIT = 3


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})


async def closed_at_once(reader: asyncio.StreamReader) -> bool:
    try:
        return await asyncio.wait_for(reader.read(), 1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


async def get(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bytes:
    writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    return await asyncio.wait_for(reader.readuntil(b"ok"), 5)


async def test_an_address_past_its_bound_is_refused_until_a_place_frees() -> None:
    protocol = per_address(OneWriteHttpToolsProtocol, LIMIT)
    async with served(app, protocol, lifespan="off") as port:
        held = [await asyncio.open_connection("127.0.0.1", port) for _ in range(LIMIT)]
        await asyncio.sleep(0.1)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        assert await closed_at_once(reader)  # one too many
        writer.close()
        for r, w in held:  # the held ones are served
            assert (await get(r, w)).startswith(b"HTTP/1.1 200")
        held[0][1].close()
        await asyncio.sleep(0.1)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)  # the freed place
        assert (await get(reader, writer)).startswith(b"HTTP/1.1 200")
        for _, w in [*held[1:], (reader, writer)]:
            w.close()


async def test_connections_one_after_another_never_reach_the_bound() -> None:
    protocol = per_address(OneWriteHttpToolsProtocol, LIMIT)
    async with served(app, protocol, lifespan="off") as port:
        for _ in range(LIMIT * 4):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            assert (await get(reader, writer)).startswith(b"HTTP/1.1 200")
            writer.close()
            await writer.wait_closed()
            await asyncio.sleep(0.02)  # the server sees the close
        assert protocol.open_by_address == {}


async def test_no_bound_when_it_is_zero() -> None:
    assert per_address(OneWriteHttpToolsProtocol, 0) is OneWriteHttpToolsProtocol


def test_addresses_of_one_ipv6_network_share_its_places() -> None:
    """One IPv6 host may connect from every address of its /64: they count as one address."""
    protocol = per_address(OneWriteHttpToolsProtocol, 2)

    def connection(host: str) -> OneWriteHttpToolsProtocol:
        made = object.__new__(protocol)  # what connection_made reads: the client's address
        made.client = (host, 1)
        return made

    held = [connection("2001:db8:0:1::1"), connection("2001:db8:0:1:ffff:ffff:ffff:ffff")]
    assert all(c._take_place() for c in held)
    assert not connection("2001:db8:0:1:abcd::9")._take_place()  # a third of that /64: refused
    assert connection("2001:db8:0:2::1")._take_place()  # another network has its own places
    assert connection("::ffff:192.0.2.1")._take_place() and connection("192.0.2.1")._take_place()
    assert not connection("192.0.2.1")._take_place()  # IPv4-mapped: the IPv4 address's places
    assert protocol.open_by_address == {"2001:db8:0:1::/64": 2, "2001:db8:0:2::/64": 1, "192.0.2.1": 2}
