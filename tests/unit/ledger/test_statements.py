"""Statements, envelopes, keys and the canonical encoding: pure checks."""

from __future__ import annotations

import base64
import json
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.helpers import new_card

from trustscore import canonical
from trustscore.errors import InvalidInput, SignatureError, UnknownSigner, UnsupportedKind
from trustscore.ledger import dsse, keys, note
from trustscore.ledger.statements import parse_statement
from trustscore.ledger.submission import check, prepare

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53 - 1), 2**53 - 1) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@given(json_values)
def test_canonical_encoding_round_trips_and_is_stable(value: object) -> None:
    data = canonical.encode(value)
    assert canonical.encode(json.loads(data)) == data
    assert json.loads(data) == value


def test_canonical_refuses_floats() -> None:
    with pytest.raises(InvalidInput, match="floats"):
        canonical.encode({"a": [1, 0.5]})


def test_pae_matches_the_dsse_spec_example() -> None:
    # From the DSSE protocol document.
    assert dsse.pae("http://example.com/HelloWorld", b"hello world") == (
        b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
    )


def test_key_file_is_private_and_round_trips(tmp_path: Path) -> None:
    key = keys.SigningKey.generate()
    path = tmp_path / "k.key"
    keys.write_key_file(path, key)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert keys.read_key_file(path).public_key == key.public_key
    with pytest.raises(InvalidInput, match="refusing to overwrite"):
        keys.write_key_file(path, key)
    (tmp_path / "junk").write_text("hello")
    with pytest.raises(InvalidInput, match="not a trustscore key file"):
        keys.read_key_file(tmp_path / "junk")
    with pytest.raises(InvalidInput, match="does not exist"):
        keys.read_key_file(tmp_path / "missing")


def test_card_is_self_certifying() -> None:
    key, env = new_card("me", endpoint="https://agent.example/x", capabilities=["coding"])
    entry = check(prepare(msgspec.to_builtins(env)), lambda _k: None)
    assert entry.signer == entry.subject == key.id
    assert entry.introduces_key == key.public_key
    assert entry.leaf == dsse.leaf_bytes(env)


def test_statement_kind_checks() -> None:
    _key, env = new_card("me")
    stmt = json.loads(canonical.b64decode(env.payload))
    cases: list[tuple[Callable[[dict[str, Any]], object], type[Exception], str]] = [
        (lambda s: s.update(_type="x"), UnsupportedKind, "_type"),
        (
            lambda s: s.update(predicateType="https://trustscore.dev/predicates/x/v9"),
            UnsupportedKind,
            "unknown",
        ),
        (lambda s: s["predicate"].update(nonce="short"), InvalidInput, "nonce"),
        (lambda s: s["predicate"].update(issued_at="yesterday"), InvalidInput, "issued_at"),
        (lambda s: s["predicate"].update(endpoint="ftp://x"), InvalidInput, "endpoint"),
        (lambda s: s["predicate"].update(extra=1), InvalidInput, "extra"),
        (lambda s: s.update(subject=[]), InvalidInput, "no subject"),
        (lambda s: s["subject"][0].update(name="ts1_" + "0" * 40), InvalidInput, "subject"),
    ]
    for mutate, exc, words in cases:
        s = json.loads(json.dumps(stmt))
        mutate(s)
        with pytest.raises(exc, match=words):
            parse_statement(json.dumps(s).encode())


def test_signatures_must_all_verify_and_come_from_the_right_key() -> None:
    key, env = new_card("me")
    other = keys.SigningKey.generate()
    payload = canonical.b64decode(env.payload)
    both = dsse.sign(payload, [key, other])
    with pytest.raises(UnknownSigner):
        check(prepare(msgspec.to_builtins(both)), lambda _k: None)
    entry = check(prepare(msgspec.to_builtins(both)), {other.id: other.public_key}.get)
    assert entry.signer == key.id
    only_other = dsse.sign(payload, [other])
    with pytest.raises(SignatureError, match="must be signed by"):
        check(prepare(msgspec.to_builtins(only_other)), {other.id: other.public_key}.get)


def test_an_envelope_in_non_canonical_base64_is_refused() -> None:
    """Nonzero pad bits decode to the same bytes in Python; such a leaf is unreadable to a strict decoder
    (found by a conformance review: an envelope whose signature ended in such a character was logged)."""
    assert canonical.b64decode("AA==") == b"\x00"
    with pytest.raises(InvalidInput, match="not canonical base64"):
        canonical.b64decode("AB==")
    _key, env = new_card("me")
    sig = env.signatures[0].sig
    assert sig.endswith("==")  # 64 bytes: the last character before the padding carries 4 unused bits
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    loose = sig[:-3] + alphabet[alphabet.index(sig[-3]) ^ 1] + "=="
    assert base64.b64decode(loose) == base64.b64decode(sig)
    bad = msgspec.structs.replace(env, signatures=[dsse.Signature(env.signatures[0].keyid, loose)])
    with pytest.raises(InvalidInput, match="not canonical base64"):
        check(prepare(msgspec.to_builtins(bad)), lambda _k: None)
    check(prepare(msgspec.to_builtins(env)), lambda _k: None)


def test_regression_verifier_key_with_plus_in_base64_parses() -> None:
    # Base64 keys contain '+' about half the time; parsing once split on every '+'.
    for _ in range(64):
        key = keys.SigningKey.generate()
        vkey = note.make_verifier_key("trustscore.local/log", key.public_key)
        assert note.parse_verifier_key(vkey).public_key == key.public_key


def test_controller_must_cosign_the_card() -> None:
    from trustscore.cli.agent import card_envelope

    key, boss = keys.SigningKey.generate(), keys.SigningKey.generate()
    env = card_envelope(key, "ctl", controller=boss)
    entry = check(prepare(msgspec.to_builtins(env)), lambda _k: None)
    assert entry.statement.facts.cosigners == ((boss.id, boss.public_key),)
    unsigned = dsse.sign(canonical.b64decode(env.payload), [key])
    with pytest.raises(SignatureError, match=f"must be signed by {boss.id}"):
        check(prepare(msgspec.to_builtins(unsigned)), lambda _k: None)


@given(
    payload_type=st.text(max_size=30),
    payload=st.text(max_size=40),
    sigs=st.lists(st.tuples(st.text(max_size=12), st.text(max_size=12)), min_size=1, max_size=4),
)
def test_leaf_bytes_are_the_canonical_encoding(
    payload_type: str, payload: str, sigs: list[tuple[str, str]]
) -> None:
    """leaf_bytes encodes the envelope struct directly (no float check: it holds only strings); the
    bytes must be exactly what the documented canonical encoding gives, non-ASCII text included."""
    env = dsse.Envelope(payload_type, payload, [dsse.Signature(k, s) for k, s in sigs])
    assert dsse.leaf_bytes(env) == canonical.encode(env)
    assert json.loads(dsse.leaf_bytes(env)) == json.loads(canonical.encode(msgspec.to_builtins(env)))
