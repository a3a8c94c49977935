"""A deterministic, language-neutral random stream for item generators.

Python's ``random`` module is not a published algorithm that stays fixed across versions, and a released
generator must produce the same item forever, so generators draw from SHAKE-256 instead:
block ``b`` of the stream is ``SHAKE-256(key || b as 8 big-endian bytes)`` (256 bytes), read as
big-endian 64-bit words; ``key = SHA-256("trustscore-gen/v1" 0x00 label 0x00 seed)``. A number below
``n`` is drawn by rejection (no modulo bias). See docs/exams.md ("Item generators").
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")
_BLOCK = 256
_TWO64 = 1 << 64


class Rng:
    """A random stream keyed by ``label`` (the generator ref) and ``seed`` (the item's seed)."""

    __slots__ = ("_block", "_buf", "_key", "_pos")

    def __init__(self, seed: bytes, label: str) -> None:
        self._key = hashlib.sha256(b"trustscore-gen/v1\x00" + label.encode() + b"\x00" + seed).digest()
        self._block = 0
        self._buf = b""
        self._pos = _BLOCK

    def _u64(self) -> int:
        if self._pos >= _BLOCK:
            self._buf = hashlib.shake_256(self._key + self._block.to_bytes(8, "big")).digest(_BLOCK)
            self._block += 1
            self._pos = 0
        word = int.from_bytes(self._buf[self._pos : self._pos + 8], "big")
        self._pos += 8
        return word

    def below(self, n: int) -> int:
        """Uniform in ``0..n-1``."""
        if not 0 < n < _TWO64:
            raise ValueError("n must be in 1..2**64-1")
        limit = _TWO64 - _TWO64 % n
        while True:
            word = self._u64()
            if word < limit:
                return word % n

    def between(self, lo: int, hi: int) -> int:
        """Uniform in ``lo..hi`` inclusive."""
        return lo + self.below(hi - lo + 1)

    def choice(self, options: Sequence[T]) -> T:
        return options[self.below(len(options))]

    def sample(self, options: Sequence[T], k: int) -> list[T]:
        """``k`` distinct elements in random order (a partial Fisher-Yates shuffle)."""
        pool = list(options)
        for i in range(k):
            j = i + self.below(len(pool) - i)
            pool[i], pool[j] = pool[j], pool[i]
        return pool[:k]

    def shuffled(self, options: Sequence[T]) -> list[T]:
        return self.sample(options, len(options))

    def token(self, alphabet: str, length: int) -> str:
        return "".join(alphabet[self.below(len(alphabet))] for _ in range(length))
