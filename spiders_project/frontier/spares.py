"""Spare leases: the next request of a capped host, there before the slot frees.

A host at its cap (``CONCURRENT_REQUESTS_PER_DOMAIN``, cluster-wide) gets a
new download only once one of its slots comes back. Through Redis that is
two round trips: the release of the ended download, then a lease call that
finds the slot free, and far from Redis each slot sits empty for both
(docs/BENCHMARKS.md, Distance). So a worker that holds slots of a host without delay
also leases up to ``FRONTIER_SPARES`` of its requests as spares, which hold
no slot (``lua/lease.lua``); when one of its downloads of that host ends, the
slot passes to a spare at once, and Redis hears of it in the next write tick
(``lua/ack.lua``'s transfers). The host's downloads in flight never exceed
the cap, since a spare starts only in the place of a download that ended.

Fair shares: a worker keeps passing its slots on only while it holds no more
than its share of them, ``ceil(cap / (1 + w))`` where ``w`` is the number of
other workers its last lease call found waiting for the host; above that, a
slot that frees is given back through Redis, where the waiting workers take
it first (``lua/ack.lua``'s hand-over). Spares of a host whose slots this
worker no longer holds go back to their queue.
"""

from __future__ import annotations

import math
from collections import Counter, deque
from collections.abc import Callable, Iterator

from scrapy import Request

from spiders_project.frontier.lease_id import Lease

Leased = tuple[Request, Lease]
RECENT = 8  # hosts (frontier/taking.py's candidates)


class Spares:
    """This worker's slots per host, and the spare leases waiting to take them."""

    def __init__(self, depth: int, cap: int) -> None:
        self.depth = depth  # FRONTIER_SPARES: spare leases held at most, all hosts together
        self.cap = cap  # CONCURRENT_REQUESTS_PER_DOMAIN
        # Leases of this worker that hold a slot (leased, download not yet ended).
        self.slots: Counter[str] = Counter()
        self._waiting: dict[str, deque[Leased]] = {}
        # Other workers waiting for a host at its cap, as the last lease call said.
        self._others: dict[str, int] = {}
        # Leases whose download ended and whose slot is kept for a spare to come.
        self._parked: dict[bytes, Lease] = {}
        # Hosts this worker found at their cap last (RECENT at most), oldest first.
        self._recent: dict[str, None] = {}

    def __len__(self) -> int:
        return sum(len(q) for q in self._waiting.values())

    def __iter__(self) -> Iterator[Leased]:
        for queue in self._waiting.values():
            yield from queue

    def wanted(self, delay_ms: Callable[[str], int]) -> list[tuple[str, int, int, bool]]:
        """(host, 0, spares to lease, holds) for the hosts without delay whose slots
        we hold, then for those we leased from last (spares with the slots the call
        gives, if it gives any).

        Up to two caps' worth per host: a busy worker's event loop sees the
        downloads that ended while it parsed all at once, often every slot it
        holds, and its next lease call's reply comes a round trip and a parse
        later. With one cap's worth, workers far from Redis often found no spare
        when a download ended, and their slots waited a round trip
        (docs/BENCHMARKS.md, Distance, has both depths measured)."""
        room = self.depth - len(self)
        out = []
        for host in self.recent():
            if room <= 0:
                break
            if delay_ms(host) != 0:
                continue
            n = min(room, 2 * self.cap - len(self._waiting.get(host, ())))
            if n > 0:
                out.append((host, 0, n, self.slots[host] > 0))
                room -= n
        return out

    def add(self, request: Request, lease: Lease) -> bool:
        """Keep a spare; False if we hold no slot of its host any more (its
        downloads ended while the lease call was under way): it must go back."""
        if self.slots[lease.host] <= 0:
            return False
        self._waiting.setdefault(lease.host, deque()).append((request, lease))
        return True

    def took_slot(self, host: str) -> None:
        self.slots[host] += 1

    def capped(self, host: str) -> None:
        """A lease call found ``host`` at its cap, or left it there."""
        self._recent.pop(host, None)
        self._recent[host] = None
        if len(self._recent) > RECENT:
            del self._recent[next(iter(self._recent))]

    def recent(self) -> list[str]:
        """Hosts found at their cap last, newest first: candidates of the next lease
        call besides those the last one named ready, which leave out a host at its
        cap (out of the ready-set), though a slot of it may be free now (one round
        trip less). Hosts below their cap are named only by the ready-set, so hosts
        with a delay take turns between workers as before."""
        return list(reversed(self._recent))

    def contested(self, host: str, others: int) -> None:
        self._others[host] = others
        self.capped(host)

    def share(self, host: str) -> int:
        return math.ceil(self.cap / (1 + self._others.get(host, 0)))

    def successor(self, host: str) -> Leased | None:
        """A spare to take the slot of a download of ``host`` that just ended, or None
        (the slot then goes back through Redis: ``slot_ended``)."""
        queue = self._waiting.get(host)
        if not queue or self.slots[host] > self.share(host):
            return None
        leased = queue.popleft()
        if not queue:
            del self._waiting[host]
        return leased

    def may_park(self, host: str) -> bool:
        """Whether the slot of a download of ``host`` that ended with no spare in hand
        may wait for the spares of the next lease call (one round trip at most)."""
        return self.depth > 0 and self.slots[host] <= self.share(host)

    def park(self, lease: Lease) -> None:
        self._parked[lease.id] = lease

    def parked(self) -> list[Lease]:
        return list(self._parked.values())

    def is_parked(self, lease: Lease) -> bool:
        return lease.id in self._parked

    def unpark(self, lease: Lease) -> bool:
        """Forget a parked slot; False if it was not parked."""
        return self._parked.pop(lease.id, None) is not None

    def slot_ended(self, host: str) -> list[Leased]:
        """One slot of ``host`` given back; the spares to hand back if it was our last."""
        self.slots[host] -= 1
        if self.slots[host] > 0:
            return []
        del self.slots[host]
        self._others.pop(host, None)
        return list(self._waiting.pop(host, ()))

    def take_all(self) -> list[Leased]:
        """Every spare, forgotten here (shutdown, a long pause: they go back)."""
        out = list(self)
        self._waiting.clear()
        return out
