"""Which active subscriptions want an event, without re-reading them (docs/webhooks.md, "Durability").

The projector keeps :class:`ActiveSubscriptions` between its steps: each subscription's matching data
(subscriber, event types, agents, threshold), found by the event's agent in a dictionary, so that
matching an event costs the subscriptions about its agent and those about every agent, not a parse of
every active subscription's statement (audit HIGH 1). Also the URL host key the dispatcher limits its
requests in flight by.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from trustscore.kinds.subscriptions import Subscription
from trustscore.webhooks.events import WebhookEvent, wants_change

_NETLOC = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://([^/?#]*)")
_PORT = re.compile(r":[0-9]*$")


@dataclass(frozen=True)
class Active:
    """What of an active subscription matching needs; ``agents`` empty: every agent."""

    id: int  # its log index
    subscriber: str
    events: frozenset[str]
    agents: tuple[str, ...]
    threshold: int

    @classmethod
    def of(cls, index: int, s: Subscription) -> Active:
        return cls(index, s.subscriber, frozenset(s.events), tuple(s.agents), s.threshold)

    @classmethod
    def row(
        cls, index: int, subscriber: str, events: Sequence[str], agents: Sequence[str], threshold: int
    ) -> Active:
        return cls(index, subscriber, frozenset(events), tuple(agents), threshold)


class ActiveSubscriptions:
    """The active subscriptions by id, with an index from agent to the subscriptions naming it."""

    def __init__(self, subs: Iterable[Active] = ()) -> None:
        self._subs: dict[int, Active] = {}
        self._by_agent: dict[str, set[int]] = {}
        self._every: set[int] = set()  # subscriptions to every agent
        for s in subs:
            self.add(s)

    def __len__(self) -> int:
        return len(self._subs)

    def get(self, sid: int) -> Active | None:
        return self._subs.get(sid)

    def add(self, s: Active) -> None:
        self.remove(s.id)
        self._subs[s.id] = s
        if not s.agents:
            self._every.add(s.id)
        for a in s.agents:
            self._by_agent.setdefault(a, set()).add(s.id)

    def remove(self, sid: int) -> None:
        s = self._subs.pop(sid, None)
        if s is None:
            return
        self._every.discard(sid)
        for a in s.agents:
            ids = self._by_agent[a]
            ids.discard(sid)
            if not ids:
                del self._by_agent[a]

    def matching(self, event: WebhookEvent) -> list[int]:
        """The ids, ascending, of the subscriptions logged before ``event``'s cause that want it."""
        candidates = self._every | self._by_agent.get(event.agent, set())
        return sorted(
            sid
            for sid in candidates
            if sid < event.index and wants_change(self._subs[sid].events, self._subs[sid].threshold, event)
        )


def host_key(url: str) -> str:
    """The host a URL reaches, as the dispatcher counts requests in flight: lower case, without port or
    trailing dot (``store/webhooks.py`` ``due`` computes the same in SQL)."""
    m = _NETLOC.match(url)
    netloc = m.group(1).lower() if m else ""
    return _PORT.sub("", netloc).rstrip(".")
