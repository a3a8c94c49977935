"""``trustscore serve`` bounds the connections one client address holds open at once
(TRUSTSCORE_ADDRESS_CONNECTIONS, docs/service.md): the setting reaches the protocol uvicorn serves with."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import httpx

from trustscore.devserver import ServeProcess


def closed_at_once(sock: socket.socket) -> bool:
    sock.settimeout(2)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def test_a_third_connection_from_one_address_is_closed_when_two_are_allowed(tmp_path: Path, dsn: str) -> None:
    with ServeProcess(tmp_path / "data", dsn, env={"TRUSTSCORE_ADDRESS_CONNECTIONS": "2"}) as server:
        held = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(2)]
        time.sleep(0.2)
        with socket.create_connection(("127.0.0.1", server.port)) as third:
            assert closed_at_once(third)
        held.pop().close()
        time.sleep(0.2)
        assert httpx.get(server.url + "/readyz", timeout=5).status_code == 200  # the freed place
        for sock in held:
            sock.close()
