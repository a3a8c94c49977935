"""The weight of an attestation bundle is estimated before any leaf is read (services/attestations.py,
``json_estimate``): from above, so that the bound and the budget are never passed by the bundle made."""

from __future__ import annotations

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from trustscore.attestations import rating as attestation
from trustscore.ledger import dsse
from trustscore.services.attestations import json_estimate

ENVELOPE = dsse.Envelope(payloadType="application/vnd.in-toto+json", payload="", signatures=[])


@given(
    leaves=st.lists(st.integers(0, 5000), min_size=1, max_size=40),
    tree_size=st.integers(1, 2**40),
    data=st.data(),
)
@settings(max_examples=200, deadline=None)
def test_the_estimate_is_from_above(leaves: list[int], tree_size: int, data: st.DataObject) -> None:
    """Every entry with the longest proof its tree size allows, at the largest indexes, its index again
    in the attestation's list of entries (base64 in the payload): the JSON is at most the estimate less
    the 4 KiB kept for the envelope's other fields, and not far below it."""
    height = max(1, (tree_size - 1).bit_length())
    first = data.draw(st.integers(max(0, tree_size - len(leaves)), max(0, tree_size - 1)))
    entries = [(first + i, b"\xff" * size, [b"\x00" * 32] * height) for i, size in enumerate(leaves)]
    listed = msgspec.json.encode([i for i, _, _ in entries])
    envelope = dsse.Envelope(ENVELOPE.payloadType, "A" * (4 * len(listed) // 3 + 4), [])
    bundle = attestation.make_bundle(
        envelope, log_verifier_key="", checkpoint_note="", entries=entries, weights_model=""
    )
    made = len(msgspec.json.encode(bundle))
    estimate = json_estimate(sum(leaves), len(leaves), tree_size)
    assert made <= estimate - 4096 + 200  # the 200: this bundle's own keys and empty fields
    assert estimate <= 1.1 * made + 4096 + 64 * len(leaves)
