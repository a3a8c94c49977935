"""A client for auditors: everything it returns is proven against the log's verifier key.

:class:`VerifyingClient` wraps a :class:`LogReader` (the API's or the tiles' client, trusting nothing) and turns
what a server says into verified facts, or raises :class:`~trustscore.errors.VerificationError`:

- :meth:`VerifyingClient.checkpoint`: the latest checkpoint, its signature checked with the verifier key;
- :meth:`VerifyingClient.consistent`: an older checkpoint is a prefix of a newer one (consistency proof);
- :meth:`VerifyingClient.included`: an entry's leaf, proven included in a checkpoint;
- :meth:`VerifyingClient.entry`: an entry with its inclusion proven and every signature verified against
  the signer's card, itself proven included (service cards must be co-signed by the log key).

The CLI (``log verify``, ``reverify check``) and the demo use it; a third-party auditor can too
(docs/ledger-format.md, "Verifying as an auditor").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from trustscore.errors import VerificationError
from trustscore.kinds.service_card import ServiceCard
from trustscore.ledger import audit, keys, merkle, note
from trustscore.ledger.checkpoint import Checkpoint, open_checkpoint, verify_consistent
from trustscore.ledger.submission import CheckedEntry


class LogReader(Protocol):
    """What :class:`VerifyingClient` reads: :class:`~trustscore.client.LogClient` (the API) or
    :class:`~trustscore.tiles_client.TileClient` (C2SP tlog-tiles); nothing either says is trusted."""

    def checkpoint(self) -> str: ...
    def entries(self, start: int, end: int) -> list[tuple[int, bytes]]: ...
    def inclusion_proof(self, index: int, size: int) -> list[bytes]: ...
    def consistency_proof(self, size1: int, size2: int) -> list[bytes]: ...
    def key_index(self, key_id: str) -> int: ...


@dataclass(frozen=True)
class VerifiedEntry:
    """An entry proven included in ``checkpoint_size`` whose every signature verified.

    ``signers`` maps each signing key id to its public key, as registered by a card in the same log (the
    log key for a service card's co-signature).
    """

    index: int
    leaf: bytes
    checkpoint_size: int
    checked: CheckedEntry
    signers: dict[str, bytes]


class VerifyingClient:
    """Fetch from ``client`` and prove everything against ``verifier`` (the log's verifier key)."""

    def __init__(self, client: LogReader, verifier: note.Verifier) -> None:
        self.client = client
        self.verifier = verifier
        self.log_key_id = keys.key_id(verifier.public_key)

    def open(self, signed: str) -> Checkpoint:
        """A signed checkpoint's contents, its signature by the log key verified."""
        return open_checkpoint(signed, self.verifier, None)

    def checkpoint(self) -> Checkpoint:
        """The server's latest checkpoint, its signature verified."""
        return self.open(self.client.checkpoint())

    def consistent(self, old: Checkpoint, new: Checkpoint) -> None:
        """Raise unless ``old`` is a prefix of ``new`` (same log; a consistency proof verifies)."""
        if old.size > new.size:
            raise VerificationError(f"previous checkpoint ({old.size}) is larger than this one ({new.size})")
        proof = self.client.consistency_proof(old.size, new.size) if old.size else []
        verify_consistent(old, new, proof)

    def root_at(self, cp: Checkpoint, size: int, root: bytes) -> None:
        """Raise unless ``root`` is the log's root at ``size``, by a consistency proof to ``cp``."""
        if not 0 < size <= cp.size:
            raise VerificationError(f"size {size} is not within the signed checkpoint (size {cp.size})")
        if size == cp.size:
            if root != cp.root:
                raise VerificationError(f"the root given for size {size} is not the signed checkpoint's root")
            return
        proof = self.client.consistency_proof(size, cp.size)
        merkle.verify_consistency(size, cp.size, proof, root, cp.root)

    def included(self, cp: Checkpoint, index: int) -> bytes:
        """Entry ``index``'s leaf, after checking its inclusion proof against the verified ``cp``."""
        if not 0 <= index < cp.size:
            raise VerificationError(f"entry {index} is not in the checkpoint (size {cp.size})")
        got = self.client.entries(index, index + 1)
        if not got or got[0][0] != index:
            raise VerificationError(f"the server did not return entry {index}")
        leaf = got[0][1]
        proof = self.client.inclusion_proof(index, cp.size)
        merkle.verify_inclusion(merkle.leaf_hash(leaf), index, cp.size, proof, cp.root)
        return leaf

    def card(self, cp: Checkpoint, key_id: str) -> VerifiedEntry:
        """The card that registers ``key_id``, proven included in ``cp`` and verified.

        A card is signed by the key it introduces; a service card must also be co-signed by the log key.
        """
        index = self.client.key_index(key_id)
        leaf = self.included(cp, index)
        log_key = {self.log_key_id: self.verifier.public_key}
        checked = audit.verify_leaf(leaf, log_key.get)
        if checked.introduces_key is None or checked.subject != key_id:
            raise VerificationError(f"entry {index}, named as the card of {key_id}, does not register it")
        signers = {key_id: checked.introduces_key}
        envelope_signers = {s.keyid for s in audit.parse_leaf(leaf).envelope.signatures}
        if isinstance(checked.statement.predicate, ServiceCard):
            if self.log_key_id not in envelope_signers:
                raise VerificationError(
                    f"the service card of {key_id} (entry {index}) is not co-signed by the log key"
                )
            signers[self.log_key_id] = self.verifier.public_key
        return VerifiedEntry(index, leaf, cp.size, checked, signers)

    def entry(self, cp: Checkpoint, index: int) -> VerifiedEntry:
        """Entry ``index`` proven included in ``cp``, every signature verified against a proven card."""
        leaf = self.included(cp, index)
        prepared = audit.parse_leaf(leaf)
        own = prepared.statement.facts.introduces_key
        own_id = keys.key_id(own) if own is not None else None
        signers: dict[str, bytes] = {}
        for sig in prepared.envelope.signatures:
            if sig.keyid in signers:
                continue
            if sig.keyid == self.log_key_id:
                signers[sig.keyid] = self.verifier.public_key
            elif sig.keyid == own_id and own is not None:
                signers[sig.keyid] = own
            else:
                signers[sig.keyid] = self.card(cp, sig.keyid).checked.introduces_key or b""
        checked = audit.verify_leaf(leaf, signers.get)
        return VerifiedEntry(index, leaf, cp.size, checked, signers)

    def service_key(self, cp: Checkpoint, key_id: str, role: str) -> bytes:
        """The public key of service ``key_id``, from its proven, log-co-signed card with ``role``."""
        card = self.card(cp, key_id)
        service = card.checked.statement.predicate
        if not isinstance(service, ServiceCard):
            raise VerificationError(f"entry {card.index} is not the service card of {key_id}")
        if role not in service.roles:
            raise VerificationError(f"service key {key_id} has no {role} role")
        return card.signers[key_id]
