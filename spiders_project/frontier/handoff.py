"""What happens to a cap slot when its download ends: passed on, kept a moment, or given back.

The scheduler's leases pass through here at three moments: when a download
ends (``download_ended``, Scrapy's signal), when the engine is done with the
page (``ack_finished``) and after each lease call (``leased``). The slot of a
download that ended goes, in this order of preference:

1. to a spare lease of the same host (``spares.py``), at once, without a
   round trip (``lua/ack.lua``'s transfer, in the next write tick);
2. with no spare in hand, it is kept ("parked") until the reply of the next
   lease call, which asks for spares: one round trip at most, the cost of
   the release it saves; the lease's ack waits for it too (its items and
   links are written already; a worker killed meanwhile fetches it again);
3. back to Redis (``release``): with spares off, above this worker's share
   of a host others wait for, with no room for more requests in the engine,
   or when the next lease call brought no spare.

Slots and spares are kept for the HTTP queue only: the render queue's
downloads take seconds, against which a round trip is nothing.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any

from scrapy import Request, Spider
from scrapy import signals as scrapy_signals
from scrapy.crawler import Crawler
from scrapy.http import Response
from scrapy.signalmanager import SignalManager

from spiders_project.frontier.lease_id import Lease
from spiders_project.frontier.leases import LeaseKeeper
from spiders_project.frontier.outcomes import (
    Outcome,
    request_dead_lettered,
    request_dropped,
    request_held,
    request_refused,
    request_unchanged,
)
from spiders_project.frontier.spares import Leased, Spares
from spiders_project.frontier.taking import Taken
from spiders_project.frontier.write_behind.batcher import RedisBatcher
from spiders_project.insides import internals
from spiders_project.keys import HTTP


class SlotHandoff:
    """The slots of this worker's leases between downloads (see the module docstring)."""

    def __init__(
        self,
        crawler: Crawler,
        spares: Spares,
        batcher: RedisBatcher,
        leases: LeaseKeeper,
        limit: int,
        want: asyncio.Event,
    ) -> None:
        self.crawler = crawler
        self.spares = spares
        self.batcher = batcher
        self.leases = leases
        self.stats = crawler.stats
        # Leases held at most: CONCURRENT_REQUESTS + FRONTIER_PREFETCH + FRONTIER_SPARES.
        self.limit = limit
        self._want = want  # the scheduler's: set to lease again
        # Leased requests ready for the engine, and those it has (the scheduler's).
        self.prefetched: deque[Leased] = deque()
        self.active: dict[Request, Lease] = {}
        # Lease ids whose download ended (slot passed on, kept or given back),
        # and those whose host was at its cap when leased (their release is urgent).
        self.released: set[bytes] = set()
        self.at_cap: set[bytes] = set()
        self._done: dict[bytes, Lease] = {}  # parked leases whose page is processed
        # Leases whose response reached the spider: their ack counts a page of
        # their job (lua/ack.lua). Retries and redirects are new requests, and
        # a download that failed or a request refused gives no response.
        self.fetched: set[bytes] = set()
        self.items: dict[bytes, int] = {}  # lease id -> items scraped from its page
        # Leases whose request became a dead letter, was refused, dropped or held (outcomes.py).
        self.outcomes: dict[bytes, Outcome] = {}

    def connect(self, signals: SignalManager) -> None:
        """Hear Scrapy's signals and the features' outcomes (``frontier/outcomes.py``)."""
        signals.connect(self.download_ended, signal=scrapy_signals.request_left_downloader)
        signals.connect(self.response_received, signal=scrapy_signals.response_received)
        signals.connect(self.unchanged, signal=request_unchanged)
        signals.connect(self.item_scraped, signal=scrapy_signals.item_scraped)
        signals.connect(self.dead_lettered, signal=request_dead_lettered)
        signals.connect(self.refused, signal=request_refused)
        signals.connect(self.held_back, signal=request_held)
        signals.connect(self.dropped_late, signal=request_dropped)

    @staticmethod
    def slotted(lease: Lease) -> bool:
        return lease.lane == HTTP

    def took(self, lease: Lease) -> None:
        """A lease call gave ``lease``, with a slot."""
        if self.slotted(lease):
            self.spares.took_slot(lease.host)

    def download_ended(self, request: Request, spider: Spider) -> None:
        """The slot of a leased request whose download ended: on, kept or back.

        The cluster-wide cap (``CONCURRENT_REQUESTS_PER_DOMAIN``) counts
        downloads, like Scrapy's per-domain slot: a page being parsed, or
        waiting for its items to be written, holds no slot. The lease itself
        stays until the page is processed (``ack_finished``). Redirects and
        retries are new requests, leased again, so a lease has one download.
        """
        lease = self.active.get(request)
        if lease is None or lease.id in self.released:
            return
        self.released.add(lease.id)
        room = len(self.active) + len(self.prefetched) < self.limit
        if room and self.slotted(lease):
            successor = self.spares.successor(lease.host)
            if successor is not None:
                self._pass(lease, successor)
                return
            if self.spares.may_park(lease.host):
                self.spares.park(lease)
                self._want.set()  # ask for spares
                return
        self._release(lease)

    def response_received(self, response: Any, request: Request, spider: Spider) -> None:
        """Scrapy's signal: a response of ``request`` is on its way to the spider."""
        lease = self.active.get(request)
        if lease is not None:
            self.fetched.add(lease.id)

    def unchanged(self, request: Request) -> None:
        """``outcomes.request_unchanged``: fetched, ended before the spider (no item)."""
        lease = self.active.get(request)
        if lease is not None:
            self.fetched.add(lease.id)

    def item_scraped(self, item: Any, response: Response, spider: Spider) -> None:
        """Scrapy's signal: an item of ``response``'s page, counted with its lease's ack."""
        lease = self.active.get(response.request) if response.request is not None else None
        if lease is not None:
            self.items[lease.id] = self.items.get(lease.id, 0) + 1

    def dead_lettered(self, request: Request) -> None:
        """``outcomes.request_dead_lettered``: its lease's job counts a dead letter, no page."""
        self._ended_as(request, Outcome.DEAD_LETTER)

    def refused(self, request: Request) -> None:
        """``outcomes.request_refused``: its lease's job counts it refused."""
        self._ended_as(request, Outcome.REFUSED)

    def held_back(self, request: Request) -> None:
        """``outcomes.request_held``: not downloaded after all (its job was paused):
        its lease goes back to its queue when the engine is done with it."""
        self._ended_as(request, Outcome.HELD)

    def dropped_late(self, request: Request) -> None:
        """``outcomes.request_dropped``: not downloaded after all (its job was
        cancelled): its job counts it purged."""
        self._ended_as(request, Outcome.DROPPED)

    def _ended_as(self, request: Request, outcome: Outcome) -> None:
        lease = self.active.get(request)
        if lease is not None:
            self.outcomes[lease.id] = outcome

    def _ack(self, lease: Lease) -> None:
        items = self.items.pop(lease.id, 0)
        fetched = lease.id in self.fetched
        self.fetched.discard(lease.id)
        outcome = self.outcomes.pop(lease.id, None)
        if outcome is None:
            outcome = Outcome.PAGE if fetched else Outcome.NO_PAGE
        self.batcher.ack(lease, outcome, items)

    def ack_finished(self) -> None:
        """Queue the ack of every leased request the engine is done with.

        Scrapy has no signal for "this request is fully processed" (response
        scraped, its items through the pipelines, its links scheduled, or the
        download failed for good, retries and redirects included). The
        engine's slot keeps exactly that set (``internals.requests_in_progress``,
        which raises rather than guess if Scrapy changed); a request we
        handed out that is no longer there is finished. A lease whose slot is
        parked is acknowledged once the slot is settled.
        """
        if not self.active:
            return
        inprogress = internals.requests_in_progress(self.crawler.engine)
        done = [request for request in self.active if request not in inprogress]
        for request in done:
            lease = self.active.pop(request)
            if lease.id not in self.released:
                self._slot_ended(lease)  # no release sent: the ack gives the slot back
            self.released.discard(lease.id)
            if self.outcomes.get(lease.id) is Outcome.HELD:
                # Never downloaded (outcomes.request_held): back to its queue, not acked.
                del self.outcomes[lease.id]
                self.at_cap.discard(lease.id)
                self.leases.give_back(deque([(request, lease)]))
                continue
            if self.spares.is_parked(lease):
                self._done[lease.id] = lease
                continue
            self.at_cap.discard(lease.id)
            self._ack(lease)
        if done:
            self._want.set()  # their slots are free for new leases

    def held(self) -> list[Lease]:
        """Every lease this worker holds (to renew)."""
        leases = [lease for _, lease in self.prefetched]
        leases += self.active.values()
        leases += [lease for _, lease in self.spares]
        return leases + list(self._done.values())

    def dropped(self, lease: Lease) -> None:
        """A step dropped the request after its lease: ended, slot and all; its
        job counts it purged (``Outcome.DROPPED``)."""
        self.at_cap.discard(lease.id)
        self.batcher.ack(lease, Outcome.DROPPED)
        self._slot_ended(lease)

    def hold(self, request: Request, lease: Lease) -> None:
        """A step holds the request back (``steps.HOLD``): it goes back to its
        queue, with its slot, as a pause's unstarted requests do (``unstarted``)."""
        self.at_cap.discard(lease.id)
        back: deque[Leased] = deque([(request, lease)])
        if self.slotted(lease):
            back.extend(self.spares.slot_ended(lease.host))
        self.leases.give_back(back)

    def leased(self, taken: Taken, parked: list[Lease]) -> None:
        """After a lease call: keep its spares, then settle the slots ``parked``
        before the call was sent."""
        orphans = deque(s for s in taken.spares if not self.spares.add(*s))
        if taken.spares:
            self.stats.inc_value("frontier/spares_leased", len(taken.spares))
        for host, others in taken.contested.items():
            self.spares.contested(host, others)
        self.settle(parked)
        if orphans:
            self.leases.give_back(orphans)

    def settle(self, parked: list[Lease], *, release: bool = False) -> None:
        """Each parked slot to a spare (unless ``release``), or back to Redis."""
        for lease in parked:
            if not self.spares.unpark(lease):
                continue
            successor = None if release else self.spares.successor(lease.host)
            if successor is not None:
                self._pass(lease, successor)
            else:
                self._release(lease)
            if self._done.pop(lease.id, None) is not None:
                self.at_cap.discard(lease.id)
                self._ack(lease)

    def unstarted(self) -> list[Leased]:
        """A pause that may last: parked slots go back, and the spares and the
        prefetched requests are returned to be handed back."""
        self.settle(self.spares.parked(), release=True)
        out = self.spares.take_all() + list(self.prefetched)
        for _, lease in self.prefetched:
            if self.slotted(lease):
                self.spares.slot_ended(lease.host)  # its slot goes back with it
        self.prefetched.clear()
        return out

    def _pass(self, lease: Lease, successor: Leased) -> None:
        self.batcher.transfer(lease, successor[1])
        self.stats.inc_value("frontier/slots_passed")
        self.prefetched.appendleft(successor)
        self._started()

    def _started(self) -> None:
        """A spare is ready: wake the engine, and lease another."""
        internals.wake_engine(self.crawler.engine)
        self._want.set()

    def _release(self, lease: Lease) -> None:
        self.batcher.release(lease, now=lease.id in self.at_cap)
        self._slot_ended(lease)

    def _slot_ended(self, lease: Lease) -> None:
        """Our spares of the host go back too if that was our last slot there."""
        if self.slotted(lease):
            orphans = self.spares.slot_ended(lease.host)
            if orphans:
                self.leases.give_back(deque(orphans))
