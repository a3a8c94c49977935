"""Display names that look alike (issue #10): a pure skeleton and an incremental index of agents' names.

Two names are confusable when their skeletons are equal. The skeleton is NFKD, then case folding, then
every default-ignorable or format character (zero-width joiners, bidi controls, soft hyphens, Hangul
fillers), the blank Braille pattern and every space, dash, dot and underscore dropped, then the common cross-script look-alikes of :data:`LOOKALIKES`
mapped to Latin (accents are dropped too: NFKD, then marks removed); i and l are one letter, because
capital I looks like small l and case folding cannot tell which one was meant. Known limit: :data:`LOOKALIKES` is a hand-picked subset of Unicode TR39's confusables
table (Cyrillic, Greek, Armenian and digit homoglyphs of Latin letters), not all of it.
"""

from __future__ import annotations

import heapq
import unicodedata
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from itertools import accumulate

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
        # Latin small capitals (NFKD keeps them): "PayBᴏt" is "PayBot"
        "ᴀ": "a", "ʙ": "b", "ᴄ": "c", "ᴅ": "d", "ᴇ": "e", "ꜰ": "f", "ɢ": "g", "ʜ": "h", "ɪ": "i",
        "ᴊ": "j", "ᴋ": "k", "ʟ": "l", "ᴍ": "m", "ɴ": "n", "ᴏ": "o", "ᴘ": "p", "ʀ": "r", "ꜱ": "s",
        "ᴛ": "t", "ᴜ": "u", "ᴠ": "v", "ᴡ": "w", "ʏ": "y", "ᴢ": "z", "ꞯ": "q", "ᴩ": "p",
    }
)  # fmt: skip
RUN = 1 << 15  # names sorted or joined in one call while a name order is made
FEW_IDS = 256  # ids of a prefix a search ranks itself rather than search the name order's ids for
FEW_NEW = 4_096  # agents not yet sorted into the ids up to which a search looks at each of them

_DROP = frozenset(" -_.·‐‑‒–—―")
#: Letters and symbols drawn as nothing that are not format characters (Unicode's Hangul fillers, which
#: are default-ignorable, the blank Braille pattern and the musical null notehead): "PayBot\u3164"
#: showed as "PayBot" unflagged.
_BLANK = frozenset("\u115f\u1160\u3164\uffa0\u2800\U0001d159")
#: skeleton()'s drop and look-alike steps for ASCII characters, as one translation table.
_ASCII_STEPS = {
    c: None if chr(c) in _DROP or unicodedata.category(chr(c)) == "Cc" else LOOKALIKES.get(c, c)
    for c in range(128)
}


def _mapped(name: str) -> str:
    """skeleton()'s steps before the letter pairs, for any string."""
    folded = unicodedata.normalize("NFKD", name).casefold()  # decomposed: accents become marks, dropped
    kept = "".join(
        ch
        for ch in folded
        if ch not in _DROP and ch not in _BLANK and unicodedata.category(ch) not in ("Cf", "Mn", "Zs", "Cc")
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


def _joined(parts: list[str]) -> tuple[str, array[int]]:
    """``parts`` as one text, each preceded by a newline, and the offset of each part's newline (joined a
    run at a time: one C call over all of them would hold the interpreter ~0.1 s at 10^6 parts)."""
    starts = array("q", accumulate((len(p) + 1 for p in parts[:-1]), initial=0)) if parts else array("q")
    runs = ["\n" + "\n".join(parts[i : i + RUN]) for i in range(0, len(parts), RUN)]
    return "".join(runs), starts


@dataclass(frozen=True, slots=True)
class NameOrder:
    """Agents in name order (case-folded display name, then id) as of one moment, their skeletons and their
    ids each joined into one text (separated by newlines, which neither holds). A search finds a substring
    with ``str.find`` over the whole text at C speed and walks the hits in name order, stopping at its limit:
    at 10^5 agents a search that matches nothing costs one pass over ~1.5 MB of text, one that matches
    every agent stops after its first ``limit`` hits."""

    order: list[str]
    skeletons: str
    skeleton_starts: array[int]
    ids: str
    id_starts: array[int]

    @classmethod
    def of(cls, agents: Mapping[str, Named]) -> NameOrder:
        """The order of ``agents`` (a copy the caller does not change meanwhile: this may run in a thread)."""
        # Sorted a run at a time and merged in Python: one sort of 10^6 names holds the interpreter (and
        # so the event loop, when this runs in a thread) ~0.6 s; a run of 2^15, ~15 ms.
        keyed = [(named.name.casefold(), agent) for agent, named in agents.items()]
        runs = [sorted(keyed[i : i + RUN]) for i in range(0, len(keyed), RUN)]
        order = [agent for _, agent in heapq.merge(*runs)]
        skeletons, skeleton_starts = _joined([agents[a].skeleton for a in order])
        ids, id_starts = _joined(order)
        return cls(order, skeletons, skeleton_starts, ids, id_starts)

    def hits(self, key: str, prefix: str | None, skip: Callable[[str], bool], limit: int) -> list[str]:
        """The first ``limit`` agents in name order, those ``skip`` names left out, whose skeleton contains
        ``key`` (none if it is empty) or whose id starts with ``prefix`` (none if it is None or holds a
        newline)."""
        found = set(self._walk(self.skeletons, self.skeleton_starts, key, skip, limit)) if key else set()
        if prefix is not None and "\n" not in prefix:
            found.update(self._walk(self.ids, self.id_starts, f"\n{prefix}", skip, limit))
        return [self.order[i] for i in sorted(found)[:limit]]

    def _walk(
        self, text: str, starts: array[int], needle: str, skip: Callable[[str], bool], limit: int
    ) -> list[int]:
        """Positions (in name order) of the first ``limit`` parts of ``text`` holding ``needle``, not skipped."""
        out: list[int] = []
        at = text.find(needle)
        while at >= 0 and len(out) < limit:
            # The part holding the hit: a needle holds no newline but, for an id prefix, its first.
            i = bisect_right(starts, at) - 1
            if not skip(self.order[i]):
                out.append(i)
            if i + 1 == len(starts):
                break
            at = text.find(needle, starts[i + 1])
        return out


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
    # The search's name order (made by the caller from snapshot(), perhaps in a thread) and every agent first
    # fed or renamed since that snapshot, with the number of its newest change (a search scans them one by
    # one; they are skipped in the order, where their name may be an old one). Nothing is recorded before
    # the first snapshot: every agent is unordered then, and a process that never searches would keep a
    # second entry for each (~100 B an agent).
    _order: NameOrder | None = None
    _unordered: dict[str, int] = field(default_factory=dict)
    _recording: bool = False  # a snapshot was taken: changes since are recorded in _unordered
    _changes: int = 0
    _ordered_at: int = -1  # the number of the newest change in _order

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
        if (old is None or old.name != name) and self._recording:
            self._changes += 1
            self._unordered[agent] = self._changes
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

    def find(self, key: str, prefix: str, limit: int) -> list[tuple[str, bool]]:
        """At most ``limit`` agents whose skeleton contains ``key`` (none if it is empty) or whose id starts
        with ``prefix``, each with whether it is exact (its skeleton is ``key``, or its id is ``prefix``):
        exact ones first, then by case-folded name and id. Costs a scan of the agents renamed or first fed
        since the last :meth:`snapshot` (:attr:`unordered` of them) beside a search of the order.

        An empty ``key`` makes no agent exact by its skeleton, not even one whose skeleton is empty (no
        query the search takes reaches that case: an id prefix starts with "t", whose skeleton is not
        empty)."""
        if limit < 1:
            return []
        agents = self.agents
        exact = set(self.by_skeleton.get(key, ())) if key else set()
        if prefix in agents:
            exact.add(prefix)

        def rank(agent: str) -> tuple[str, str]:
            return agents[agent].name.casefold(), agent

        first = heapq.nsmallest(limit, exact, key=rank)
        want = limit - len(first)
        rest: set[str] = set()
        if want:
            # Ids are also kept sorted (ids()): a prefix of few ids (most queries are no id prefix at all) takes
            # them from there, and from the few agents waiting to be sorted in (sorting them here would cost
            # a search ~0.8 s of the event loop at 10^6 agents), sparing the order's search of every id.
            few: list[str] | None = None
            if len(self._new) <= FEW_NEW:
                at = bisect_left(self._sorted, prefix)
                few = [a for a in self._sorted[at : at + FEW_IDS + 1] if a.startswith(prefix)]
                few += [a for a in self._new if a.startswith(prefix)]
                if len(few) > FEW_IDS:
                    few = None
            if few is not None:
                rest.update(a for a in few if a not in exact)
            unordered: Mapping[str, object] = agents if self._order is None else self._unordered
            if self._order is not None:
                walked = None if few is not None else prefix
                rest.update(self._order.hits(key, walked, lambda a: a in exact or a in unordered, want))
            rest.update(
                a
                for a in unordered
                if a not in exact and ((key and key in agents[a].skeleton) or a.startswith(prefix))
            )
        return [(a, True) for a in first] + [(a, False) for a in heapq.nsmallest(want, rest, key=rank)]

    @property
    def ordered(self) -> bool:
        """Whether a name order was made (:meth:`order`): until then a search scans every agent."""
        return self._order is not None

    @property
    def unordered(self) -> int:
        """Agents renamed or first fed since the snapshot of the order searched (all of them before the
        first :meth:`order`): what each search scans one by one."""
        return len(self.agents) if self._order is None else len(self._unordered)

    def snapshot(self) -> tuple[dict[str, Named], int]:
        """A copy of every agent's name, to make a :class:`NameOrder` of (in a thread if it is large: ~0.25
        s at 10^5 agents), and the number of the newest change it holds, for :meth:`order`."""
        self._recording = True
        return dict(self.agents), self._changes

    def order(self, made: NameOrder, changes: int) -> None:
        """Search ``made`` (a :class:`NameOrder` of the :meth:`snapshot` numbered ``changes``) from now on,
        scanning one by one only the agents renamed or first fed after that snapshot. An order older than
        the one searched changes nothing."""
        self._recording = True  # (an order installed without a snapshot records the changes after it too)
        if changes <= self._ordered_at:
            return
        self._order, self._ordered_at = made, changes
        self._unordered = {a: n for a, n in self._unordered.items() if n > changes}

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
