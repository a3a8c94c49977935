"""What the per-address allowances charge a client as (api/addresses.py ``network_of``)."""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path
from typing import cast

import pytest
from hypothesis import given
from hypothesis import strategies as st
from litestar.types import Scope

import trustscore
from trustscore.api.addresses import address_of, network_of


@pytest.mark.parametrize(
    ("host", "charged"),
    [
        ("203.0.113.7", "203.0.113.7"),
        ("2001:db8:0:1::1", "2001:db8:0:1::/64"),
        ("2001:DB8:0:1:FFFF:FFFF:FFFF:FFFF", "2001:db8:0:1::/64"),
        ("2001:0db8:0000:0001:0000:0000:0000:0009", "2001:db8:0:1::/64"),
        ("fe80::1%eth0", "fe80::/64"),
        ("::ffff:203.0.113.7", "203.0.113.7"),  # IPv4-mapped
        ("::ffff:cb00:7107", "203.0.113.7"),
        ("64:ff9b::203.0.113.7", "203.0.113.7"),  # a NAT64 translator's client, not the translator's /64
        ("2002:cb00:7107:1::1", "203.0.113.7"),  # 6to4: the IPv4 address owns the whole /48
        ("2002:cb00:7107:ffff::1", "203.0.113.7"),
        ("2001:0:4136:e378:8000:63bf:3fff:fdd2", "192.0.2.45"),  # Teredo: its client, not its relay
        ("::203.0.113.7", "203.0.113.7"),  # IPv4-compatible
        ("::ffff:0:203.0.113.7", "203.0.113.7"),  # IPv4-translated
        ("::1", "::1"),
        ("::", "::"),
        ("testclient", "testclient"),
        ("[::1", "[::1"),
        ("::" + "0" * 80, "::" + "0" * 80),  # too long to be an address: not parsed
    ],
)
def test_a_host_is_charged_as_its_network(host: str, charged: str) -> None:
    assert network_of(host) == charged


#: Prefixes that carry an IPv4 address: ::/64, Teredo 2001::/32, 6to4 2002::/16, NAT64 64:ff9b::/96.
_EMBEDDING = [ipaddress.IPv6Network(net) for net in ("::/64", "2001::/32", "2002::/16", "64:ff9b::/64")]


@given(st.integers(0, 2**64 - 1), st.integers(0, 2**64 - 1), st.integers(0, 2**64 - 1))
def test_every_other_ipv6_address_is_charged_as_the_64_it_is_in(top: int, low: int, other: int) -> None:
    ip = ipaddress.IPv6Address(top << 64 | low)
    if any(ip in net for net in _EMBEDDING):
        return
    network = ipaddress.IPv6Network(network_of(str(ip)))
    assert network.prefixlen == 64 and ip in network
    assert network_of(str(ipaddress.IPv6Address(top << 64 | other))) == str(network)  # the same /64


def test_a_scope_without_a_client_is_unknown() -> None:
    assert address_of(cast(Scope, {"type": "http"})) == "unknown"
    assert address_of(cast(Scope, {"type": "http", "client": ("2001:db8::5", 1)})) == "2001:db8::/64"


def test_every_read_of_a_client_address_goes_through_network_of() -> None:
    """A per-address allowance keyed on the raw address would give each address of a /64 its own."""
    src = Path(trustscore.__file__).parent
    reading = re.compile(
        r"""scope\[["']client["']\]|scope\.get\(["']client["']\)|request\.client\b|self\.client\[|peername"""
    )
    readers = {
        path.relative_to(src).as_posix()
        for path in src.rglob("*.py")
        if reading.search(path.read_text(encoding="utf-8"))
    }
    assert readers == {"api/addresses.py", "cli/http_protocol.py"}
