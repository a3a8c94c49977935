"""The SSRF guard's address rules: every literal form of a non-public address is refused by class, the
operator's allow flags open exactly their class, and a public address passes without a connection."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trustscore.errors import ConfigError, InvalidInput
from trustscore.outbound.guard import (
    OutboundFailed,
    OutboundPolicy,
    OutboundRefused,
    check_url,
    classify,
    refusal,
    vet_addresses,
)

DEFAULT = OutboundPolicy()
EVERYTHING = OutboundPolicy(allow_loopback=True, allow_private=True, allow_link_local=True)

# (host as written in a URL, the class it must be refused as)
REFUSED = [
    ("127.0.0.1", "loopback"),
    ("127.1", "loopback"),
    ("127.255.255.254", "loopback"),
    ("0x7f000001", "loopback"),
    ("0x7f.1", "loopback"),
    ("2130706433", "loopback"),
    ("017700000001", "loopback"),
    ("[::1]", "loopback"),
    ("[::ffff:127.0.0.1]", "loopback"),
    ("[::ffff:7f00:1]", "loopback"),
    ("[64:ff9b::7f00:1]", "loopback"),  # NAT64 of 127.0.0.1
    ("[2002:7f00:1::]", "loopback"),  # 6to4 of 127.0.0.1
    ("10.0.0.1", "private"),
    ("10.255.255.255", "private"),
    ("172.16.0.1", "private"),
    ("172.31.255.1", "private"),
    ("192.168.1.1", "private"),
    ("100.64.0.1", "private"),
    ("100.127.255.254", "private"),
    ("[fc00::1]", "private"),
    ("[fd12:3456::1]", "private"),
    ("[::ffff:10.1.2.3]", "private"),
    ("169.254.169.254", "link-local"),
    ("169.254.0.1", "link-local"),
    ("[fe80::1]", "link-local"),
    ("[fe80::1%25eth0]", "link-local"),
    ("[::ffff:169.254.169.254]", "link-local"),
    ("0.0.0.0", "unspecified"),
    ("0", "unspecified"),
    ("0.1.2.3", "unspecified"),
    ("[::]", "unspecified"),
    ("224.0.0.1", "multicast"),
    ("239.255.255.250", "multicast"),
    ("[ff02::1]", "multicast"),
    ("255.255.255.255", "broadcast"),
    ("240.0.0.1", "reserved"),
    ("192.0.2.1", "reserved"),
    ("198.51.100.7", "reserved"),
    ("198.18.0.1", "reserved"),
    ("[2001:db8::1]", "reserved"),
    ("[::127.0.0.1]", "reserved"),  # deprecated IPv4-compatible form
]
ALLOWED_BY = {"loopback": "allow_loopback", "private": "allow_private", "link-local": "allow_link_local"}


@pytest.mark.parametrize(("host", "kind"), REFUSED)
def test_every_literal_form_is_refused_by_class(host: str, kind: str) -> None:
    with pytest.raises(OutboundRefused, match=f"(is|,) an? {kind} address") as info:
        check_url(f"http://{host}:8080/agent", DEFAULT)
    assert isinstance(info.value, InvalidInput)
    assert "\n" not in info.value.message


@pytest.mark.parametrize(("host", "kind"), [(h, k) for h, k in REFUSED if k in ALLOWED_BY])
def test_each_allow_flag_opens_its_class_only(host: str, kind: str) -> None:
    policy = OutboundPolicy(**{ALLOWED_BY[kind]: True})  # type: ignore[arg-type]
    assert check_url(f"http://{host}/", policy)
    for other in set(ALLOWED_BY) - {kind}:
        with pytest.raises(OutboundRefused, match=f"a {kind} address"):
            check_url(f"http://{host}/", OutboundPolicy(**{ALLOWED_BY[other]: True}))  # type: ignore[arg-type]


@pytest.mark.parametrize(("host", "kind"), [(h, k) for h, k in REFUSED if k not in ALLOWED_BY])
def test_unspecified_multicast_broadcast_reserved_are_always_refused(host: str, kind: str) -> None:
    with pytest.raises(OutboundRefused, match=kind):
        check_url(f"http://{host}/", EVERYTHING)


def test_the_loopback_message_names_the_address_class() -> None:
    with pytest.raises(OutboundRefused, match=r"^refused: 127\.0\.0\.1 is a loopback address$"):
        check_url("http://127.0.0.1/", DEFAULT)
    with pytest.raises(OutboundRefused, match=r"^refused: 2130706433 resolves to 127\.0\.0\.1, a loopback"):
        check_url("http://2130706433/", DEFAULT)
    with pytest.raises(OutboundRefused, match=r"it reaches 169\.254\.169\.254"):
        check_url("http://[::ffff:169.254.169.254]/", DEFAULT)


@pytest.mark.parametrize(
    ("url", "ip"),
    [
        ("http://93.184.216.34/", "93.184.216.34"),
        ("https://93.184.216.34:8443/v1", "93.184.216.34"),
        ("http://1572395042/", "93.184.216.34"),  # the same address as one decimal number
        ("http://[2606:2800:220:1:248:1893:25c8:1946]/", "2606:2800:220:1:248:1893:25c8:1946"),
        ("http://[::ffff:93.184.216.34]/", "::ffff:93.184.216.34"),
    ],
)
def test_public_addresses_pass_without_connecting(url: str, ip: str) -> None:
    assert check_url(url, DEFAULT) == [ipaddress.ip_address(ip)]


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("ftp://93.184.216.34/", "scheme 'ftp' is not http or https"),
        ("file:///etc/passwd", "scheme 'file'"),
        ("gopher://93.184.216.34/", "scheme 'gopher'"),
        ("http://user:pw@93.184.216.34/", "credentials in the URL"),
        ("http://user@93.184.216.34/", "credentials in the URL"),
        ("http:///path", "no host"),
        ("http://[::1/", "not a valid URL"),
    ],
)
def test_bad_urls_are_refused(url: str, message: str) -> None:
    with pytest.raises(OutboundRefused, match=message):
        check_url(url, DEFAULT)


def test_allowed_ports() -> None:
    policy = OutboundPolicy(allowed_ports=frozenset({443}))
    assert check_url("https://93.184.216.34/", policy)
    assert check_url("http://93.184.216.34:443/", policy)
    with pytest.raises(OutboundRefused, match="port 80 is not an allowed port"):
        check_url("http://93.184.216.34/", policy)
    with pytest.raises(OutboundRefused, match="port 6379"):
        check_url("https://93.184.216.34:6379/", policy)


def test_one_bad_address_refuses_the_host() -> None:
    ips = [ipaddress.ip_address("93.184.216.34"), ipaddress.ip_address("10.0.0.5")]
    # (for a name, the class of address only: the message reaches whoever asked, and the address would
    # map the server's internal names for anyone)
    with pytest.raises(OutboundRefused, match=r"^refused: rebind\.example resolves to a private address$"):
        vet_addresses("rebind.example", 80, ips, DEFAULT)
    same = [ipaddress.ip_address("93.184.216.34")] * 2
    assert vet_addresses("ok.example", 80, same, DEFAULT) == same[:1]
    with pytest.raises(OutboundFailed, match="resolves to no address"):
        vet_addresses("empty.example", 80, [], DEFAULT)


def test_an_unresolvable_host_is_a_failure_not_a_refusal() -> None:
    with pytest.raises(OutboundFailed, match=r"cannot resolve no-such-host\.invalid"):
        check_url("http://no-such-host.invalid/", DEFAULT)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"connect_timeout": 0},
        {"read_timeout": -1},
        {"total_timeout": 0},
        {"max_response_bytes": 0},
        {"max_redirects": -1},
        {"allowed_ports": frozenset({0})},
        {"allowed_ports": frozenset({70000})},
    ],
)
def test_policy_rejects_nonsense(kwargs: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        OutboundPolicy(**kwargs)  # type: ignore[arg-type]


ipv4 = st.integers(0, 2**32 - 1).map(ipaddress.IPv4Address)


@given(ipv4)
def test_ipv6_forms_of_an_ipv4_address_classify_as_it_does(ip: ipaddress.IPv4Address) -> None:
    mapped = ipaddress.IPv6Address(f"::ffff:{ip}")
    nat64 = ipaddress.IPv6Address(int(ipaddress.IPv6Address("64:ff9b::")) | int(ip))
    sixtofour = ipaddress.IPv6Address((0x2002 << 112) | (int(ip) << 80))
    assert classify(mapped) == classify(nat64) == classify(sixtofour) == classify(ip)


@given(st.one_of(ipv4, st.integers(0, 2**128 - 1).map(ipaddress.IPv6Address)))
def test_the_allow_flags_never_open_the_always_refused(
    ip: ipaddress.IPv4Address | ipaddress.IPv6Address,
) -> None:
    kind = classify(ip)
    assert (refusal(ip, DEFAULT) is None) == (kind is None)
    assert (refusal(ip, EVERYTHING) is None) == (kind in (None, "loopback", "private", "link-local"))
    if kind is None and isinstance(ip, ipaddress.IPv4Address):
        assert ip.is_global
