"""Fresh instances in re-verification: items generated for one run, unknown to the agent until asked.

A re-verification's public sample re-asks items the agent already answered, and its private sample
draws from a fixed private set; neither can tell an agent that has memorised answers from one that can
solve the task. So each run also asks ``k`` fresh instances from the generators of the report's exam
form (docs/exams.md). Their seeds must be unknown to the agent while it answers yet checkable by anyone
afterwards, and the server should not be free to pick them:

- the n-th fresh item's signature is the re-verification key's Ed25519 signature over
  ``FRESH_DOMAIN || run seed || u16be n`` (the run seed is public: it comes from the log's root); Ed25519
  signing is deterministic (RFC 8032), so an honest server has exactly one signature per item, and only
  the holder of the key can compute it before the run;
- its generator is the form's generator at position ``SHA-256(FRESH_DOMAIN || run seed || u16be n)``
  modulo the number of generator parts; its seed is ``SHA-256(FRESH_DOMAIN || signature)[:16]``;
- the statement records the item as a private item with ``exam`` = the generator reference,
  ``item_id`` = ``fresh-`` + the base64url signature, ``exam_digest`` = the generated item's digest.

Anyone can then verify the signature with the key from the re-verifier's service card, regenerate the
item and compare its digest (:func:`check`). Known limit: a dishonest server could sign with a
non-standard nonce to get other valid signatures (and so other items); it cannot do so unseen by the
agent's own record of what it was asked, and nothing it gains moves a rating by more than the
fresh items' weight. Pure: the signing function is passed in.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import msgspec

from trustscore.errors import InvalidInput, VerificationError
from trustscore.exams.forms import FORMS
from trustscore.exams.generators import get_generator, item_digest
from trustscore.grading.model import Item
from trustscore.kinds.reverification import sampling
from trustscore.ledger import keys

FRESH_DOMAIN = b"trustscore/reverify/fresh/v1\x00"
ITEM_PREFIX = sampling.FRESH_ITEM_PREFIX
MAX_FRESH = 16


@dataclass(frozen=True)
class FreshItem:
    generator: str  # name@version
    item: Item  # id = ITEM_PREFIX + base64url(signature)
    digest: str  # sha256:<hex> of the item


def message(run_seed: bytes, n: int) -> bytes:
    """What the re-verification key signs for the ``n``-th fresh item of the run seeded by ``run_seed``."""
    if len(run_seed) != 32 or not 0 <= n < MAX_FRESH:
        raise InvalidInput("a fresh item needs a 32-byte run seed and 0 <= n < 16")
    return FRESH_DOMAIN + run_seed + n.to_bytes(2, "big")


def generators_for(exam: str) -> list[str]:
    """The generators of ``exam``'s sitting form, in form order (empty when it has no form)."""
    return [part.generator for part in FORMS.get(exam, [])]


def _generator(exam: str, run_seed: bytes, n: int) -> str:
    refs = generators_for(exam)
    pick = int.from_bytes(hashlib.sha256(message(run_seed, n)).digest()[:8], "big")
    return refs[pick % len(refs)]


def _make(exam: str, run_seed: bytes, n: int, signature: bytes) -> FreshItem:
    ref = _generator(exam, run_seed, n)
    seed = hashlib.sha256(FRESH_DOMAIN + signature).digest()[:16]
    item_id = ITEM_PREFIX + base64.urlsafe_b64encode(signature).decode().rstrip("=")
    item = msgspec.structs.replace(get_generator(ref).make(seed), id=item_id)
    return FreshItem(ref, item, item_digest(item))


def plan(exam: str, run_seed: bytes, k: int, sign: Callable[[bytes], bytes]) -> list[FreshItem]:
    """The ``k`` fresh items of a run of a report on ``exam`` (none when the exam has no sitting form)."""
    if not generators_for(exam) or k <= 0:
        return []
    return [_make(exam, run_seed, n, sign(message(run_seed, n))) for n in range(min(k, MAX_FRESH))]


def check(
    exam: str, run_seed: bytes, recorded: Sequence[tuple[str, str, str]], verifier_key: bytes
) -> list[Item]:
    """Raise unless every recorded fresh item ``(generator, item_id, exam_digest)``, in order, is the one
    the re-verification key's signature over this run determines; return the regenerated items."""
    out = []
    for n, (generator, item_id, digest) in enumerate(recorded):
        if not item_id.startswith(ITEM_PREFIX):
            raise VerificationError(f"fresh item {n} has no {ITEM_PREFIX} id")
        raw = item_id[len(ITEM_PREFIX) :]
        try:
            signature = base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4))
        except (binascii.Error, ValueError) as exc:
            raise VerificationError(f"fresh item {n}: its id is not a base64url signature") from exc
        keys.verify(verifier_key, message(run_seed, n), signature)
        made = _make(exam, run_seed, n, signature)
        if (made.generator, made.digest) != (generator, digest):
            raise VerificationError(f"fresh item {n} is not the item its signature determines")
        out.append(made.item)
    return out
