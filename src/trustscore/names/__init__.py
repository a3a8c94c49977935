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
from collections.abc import Iterator, Mapping
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
#: skeleton()'s drop and look-alike steps for ASCII characters, as one translation table.
_ASCII_STEPS = {
    c: None if chr(c) in _DROP or unicodedata.category(chr(c)) == "Cc" else LOOKALIKES.get(c, c)
    for c in range(128)
}


def _mapped(name: str) -> str:
    """skeleton()'s steps before the letter pairs, for any string."""
    folded = unicodedata.normalize("NFKD", name).casefold()  # decomposed: accents become marks, dropped
    kept = "".join(
        ch for ch in folded if ch not in _DROP and unicodedata.category(ch) not in ("Cf", "Mn", "Zs", "Cc")
    )
    return unicodedata.normalize("NFKC", kept.translate(LOOKALIKES))


def skeleton(name: str) -> str:
    """The form two confusable names share (see the module docstring)."""
    # For ASCII the same steps are one translate (~4.5 -> ~1.4 us a name; a process computes the skeleton
    # of every agent's name at its first read): NFKD and NFKC change no ASCII character, case folding is
    # lower(), and the characters dropped are _DROP's and the controls (Zs is the space, no Cf or Mn is
    # ASCII). tests/unit/misc/test_names.py checks every ASCII character and pair, and random names.
    mapped = name.lower().translate(_ASCII_STEPS) if name.isascii() else _mapped(name)
    # Capital I is drawn like small l (TR39 maps I to l), but case folding has made it i already: so i
    # and l are one letter here (a few distinct names, "Ali" and "Al1", now share a skeleton too).
    return mapped.replace("rn", "m").replace("vv", "w").replace("l", "i")


@dataclass(frozen=True, slots=True)
class Named:
    """An agent as its cards name it: the newest card's display name and its skeleton, the index of the
    first card (its registration) and of the newest card read."""

    name: str
    skeleton: str
    first: int
    last: int


@dataclass
class NameIndex:
    """Every registered agent's current display name, by id and by skeleton, and the ids in order; fed
    agent cards in log order (a card fed again, or an older card of an agent fed after a newer one, changes
    nothing: its name is not the agent's current one)."""

    agents: dict[str, Named] = field(default_factory=dict)
    by_skeleton: dict[str, set[str]] = field(default_factory=dict)
    next_index: int = 0  # the log index after the newest card fed
    _sorted: list[str] = field(default_factory=list)  # ids in order, as of the last ids() call
    _new: list[str] = field(default_factory=list)  # ids first fed since

    def add(self, index: int, agent: str, name: str) -> None:
        self.next_index = max(self.next_index, index + 1)
        old = self.agents.get(agent)
        if old is None:
            self._new.append(agent)
        elif index <= old.last:  # not newer than the card read already: only its registration may be older
            if index < old.first:
                self.agents[agent] = Named(old.name, old.skeleton, index, old.last)
            return
        key = skeleton(name)
        if old is not None and old.skeleton != key:
            holders = self.by_skeleton[old.skeleton]
            holders.discard(agent)
            if not holders:  # renamed away: no empty set left behind per name an agent ever had
                del self.by_skeleton[old.skeleton]
        first = index if old is None else old.first
        self.agents[agent] = Named(name, key, first, index)
        self.by_skeleton.setdefault(key, set()).add(agent)

    def ids(self) -> list[str]:
        """Every agent id in ascending order. The list returned is never changed afterwards (a feed of new
        agents makes a new one at the next call), so a caller may hold it across awaits."""
        if self._new:
            # Two sorted runs: timsort merges them in one pass.
            self._sorted = sorted([*self._sorted, *sorted(self._new)])
            self._new = []
        return self._sorted

    def confusable_with(self, agent: str, name: str, limit: int = 10) -> list[str]:
        """Agents registered before ``agent`` whose names look like ``name`` (oldest first)."""
        mine = self.agents.get(agent)
        first = mine.first if mine is not None else self.next_index
        others = [
            (self.agents[o].first, o) for o in self.by_skeleton.get(skeleton(name), set()) if o != agent
        ]
        return [o for f, o in sorted(others) if f < first][:limit]


class DisplayNames(Mapping[str, str]):
    """Agent id -> current display name, read from a :class:`NameIndex` (no copy: a live view, which a
    later feed changes; iterate it without an await in between)."""

    def __init__(self, index: NameIndex) -> None:
        self._agents = index.agents

    def __getitem__(self, agent: str) -> str:
        return self._agents[agent].name

    def __iter__(self) -> Iterator[str]:
        return iter(self._agents)

    def __len__(self) -> int:
        return len(self._agents)
