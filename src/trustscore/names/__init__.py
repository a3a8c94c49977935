"""Display names that look alike (issue #10): a pure skeleton and an incremental index of agents' names.

Two names are confusable when their skeletons are equal. The skeleton is NFKD, then case folding, then
every default-ignorable or format character (zero-width joiners, bidi controls, soft hyphens) and every
space, dash, dot and underscore dropped, then the common cross-script look-alikes of :data:`LOOKALIKES`
mapped to Latin (accents are dropped too: NFKD, then marks removed); i and l are one letter, because
capital I looks like small l and case folding cannot tell which one was meant. Known limit: :data:`LOOKALIKES` is a hand-picked subset of Unicode TR39's confusables
table (Cyrillic, Greek, Armenian and digit homoglyphs of Latin letters), not all of it.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass, field

#: Characters mapped to the Latin letter they are mistaken for (after NFKC and case folding).
LOOKALIKES = str.maketrans(
    {
        # Cyrillic
        "а": "a", "в": "b", "е": "e", "ё": "e", "һ": "h", "і": "i", "ї": "i", "ј": "j", "к": "k",
        "м": "m", "н": "h", "о": "o", "р": "p", "с": "c", "т": "t", "у": "y", "х": "x", "ѕ": "s",
        "ԁ": "d", "ԛ": "q", "ԝ": "w", "ӏ": "l", "ɡ": "g",
        # Greek
        "α": "a", "β": "b", "ε": "e", "η": "n", "ι": "i", "κ": "k", "ν": "v", "ο": "o", "ρ": "p",
        "τ": "t", "υ": "u", "χ": "x", "ω": "w", "ϲ": "c", "ϳ": "j",
        # Armenian and others
        "օ": "o", "ս": "u", "ց": "g", "ı": "i", "ȷ": "j", "ℓ": "l",
        # Digits and symbols read as letters
        "0": "o", "1": "l", "|": "l", "5": "s", "$": "s", "@": "a",
    }
)  # fmt: skip
_DROP = frozenset(" -_.·‐‑‒–—―")


def skeleton(name: str) -> str:
    """The form two confusable names share (see the module docstring)."""
    folded = unicodedata.normalize("NFKD", name).casefold()  # decomposed: accents become marks, dropped
    kept = "".join(
        ch for ch in folded if ch not in _DROP and unicodedata.category(ch) not in ("Cf", "Mn", "Zs", "Cc")
    )
    mapped = unicodedata.normalize("NFKC", kept.translate(LOOKALIKES))
    # Capital I is drawn like small l (TR39 maps I to l), but case folding has made it i already: so i
    # and l are one letter here (a few distinct names, "Ali" and "Al1", now share a skeleton too).
    return mapped.replace("rn", "m").replace("vv", "w").replace("l", "i")


@dataclass
class NameIndex:
    """Every agent's current display name, by skeleton; fed agent cards in log order."""

    names: dict[str, tuple[str, int]] = field(default_factory=dict)  # id -> (skeleton, first card index)
    by_skeleton: dict[str, set[str]] = field(default_factory=dict)
    next_index: int = 0

    def add(self, index: int, agent: str, name: str) -> None:
        key = skeleton(name)
        old = self.names.get(agent)
        first = index if old is None else old[1]
        if old is not None:
            self.by_skeleton.get(old[0], set()).discard(agent)
        self.names[agent] = (key, first)
        self.by_skeleton.setdefault(key, set()).add(agent)
        self.next_index = max(self.next_index, index + 1)

    def confusable_with(self, agent: str, name: str, limit: int = 10) -> list[str]:
        """Agents registered before ``agent`` whose names look like ``name`` (oldest first)."""
        mine = self.names.get(agent)
        first = mine[1] if mine is not None else self.next_index
        others = [(self.names[o][1], o) for o in self.by_skeleton.get(skeleton(name), set()) if o != agent]
        return [o for f, o in sorted(others) if f < first][:limit]
