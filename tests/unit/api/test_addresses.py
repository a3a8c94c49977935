"""What the per-address allowances charge a client as (api/addresses.py ``network_of``)."""

from __future__ import annotations

import ipaddress
from typing import cast

import pytest
from hypothesis import given
from hypothesis import strategies as st
from litestar.types import Scope

from trustscore.api.addresses import address_of, network_of


@pytest.mark.parametrize(
    ("host", "charged"),
    [
        ("203.0.113.7", "203.0.113.7"),
        ("2001:db8:0:1::1", "2001:db8:0:1::/64"),
        ("2001:DB8:0:1:FFFF:FFFF:FFFF:FFFF", "2001:db8:0:1::/64"),
        ("2001:0db8:0000:0001:0000:0000:0000:0009", "2001:db8:0:1::/64"),
        ("fe80::1%eth0", "fe80::/64"),
        ("::ffff:203.0.113.7", "203.0.113.7"),
        ("::ffff:cb00:7107", "203.0.113.7"),
        ("testclient", "testclient"),
        ("[::1", "[::1"),
        ("::" + "0" * 80, "::" + "0" * 80),  # too long to be an address: not parsed
    ],
)
def test_a_host_is_charged_as_its_network(host: str, charged: str) -> None:
    assert network_of(host) == charged


@given(st.integers(0, 2**128 - 1))
def test_every_ipv6_address_is_charged_as_the_64_it_is_in(value: int) -> None:
    ip = ipaddress.IPv6Address(value)
    if ip.ipv4_mapped is not None:
        assert network_of(str(ip)) == str(ip.ipv4_mapped)
        return
    network = ipaddress.IPv6Network(network_of(str(ip)))
    assert network.prefixlen == 64 and ip in network
    assert network_of(str(ipaddress.IPv6Address(value ^ (2**64 - 1)))) == str(network)  # the same /64


def test_a_scope_without_a_client_is_unknown() -> None:
    assert address_of(cast(Scope, {"type": "http"})) == "unknown"
    assert address_of(cast(Scope, {"type": "http", "client": ("2001:db8::5", 1)})) == "2001:db8::/64"
