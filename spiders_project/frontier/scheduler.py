"""The worker's scheduler: scrapy-redis' Scheduler, without blocking the reactor.

scrapy-redis 0.9.1 calls Redis synchronously from ``enqueue_request`` (one
SADD and one ZADD per link) and ``next_request`` (a 2-command pop), on the
reactor thread; with Redis slow or away the whole worker freezes. Scrapy's
scheduler interface is synchronous, so this subclass answers from memory and
does the Redis work in asyncio tasks:

- ``enqueue_request`` encodes the request and hands it to the write batcher;
  deduplication and enqueueing happen in Redis, a batch per round trip.
- ``next_request`` returns a request from a small prefetch of leased requests,
  refilled in the background (``lua/lease.lua``), and wakes the engine when a
  refill lands.
- A request stays leased until the engine is done with it (downloaded, its
  callback's items and links handed over, or failed); then its ack rides in
  the same transaction as those items and links. Its host's slot of the
  cluster-wide cap comes back earlier, when its download ends. Renewal, the
  reclaim of a dead worker's expired leases and hand-back act on lease ids
  (``leases.py``); entries no worker can use are set aside (``bad_entries.py``).
- Every Redis call goes through the worker's one call path; a background loop
  that ends for any reason but shutdown exits the worker (``spawn_loop``).

It knows no feature: what seeds, URL rules, proxies, retries, rendering and
politeness do to a request on its way in is a list of steps built from
``FRONTIER_STEPS`` (``frontier/steps.py``). The lease call is in ``taking.py``,
the checks on the shared seen-set in ``seen_guard.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque

from scrapy import Request, Spider
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured
from scrapy.utils.defer import deferred_from_coro
from scrapy_redis.scheduler import Scheduler
from twisted.internet.defer import Deferred

from spiders_project.addon.checks import start_problems
from spiders_project.frontier.bad_entries import BadEntries
from spiders_project.frontier.clear import clear_frontier
from spiders_project.frontier.codec import serialize
from spiders_project.frontier.codec.serialize import InvalidEntry
from spiders_project.frontier.codec.values import ValueCodec
from spiders_project.frontier.config import FrontierConfig
from spiders_project.frontier.context import WorkerRedis
from spiders_project.frontier.dupefilter import FingerprintDupeFilter, SentFingerprints
from spiders_project.frontier.handoff import SlotHandoff
from spiders_project.frontier.leases import LeaseKeeper
from spiders_project.frontier.outcomes import link_refused
from spiders_project.frontier.queue import JsonPriorityQueue
from spiders_project.frontier.reconcile import Reconciler
from spiders_project.frontier.refused import RefusedLinks
from spiders_project.frontier.seen_guard import SeenGuard
from spiders_project.frontier.spares import Spares
from spiders_project.frontier.steps import Enqueue, FrontierSteps, Hold
from spiders_project.frontier.taking import LeaseTaker
from spiders_project.insides import internals
from spiders_project.insides.scrapy_redis_compat import not_here
from spiders_project.plumbing.pauses import EnginePauses
from spiders_project.plumbing.tasks import spawn_loop, stop_tasks, wait_event
from spiders_project.redis_access import RedisUnavailable

logger = logging.getLogger(__name__)


class FrontierScheduler(Scheduler):  # type: ignore[misc]  # scrapy-redis ships no types
    """Shared Redis frontier with leases; see the module docstring."""

    def __init__(
        self,
        crawler: Crawler,
        redis: WorkerRedis,
        dupefilter: FingerprintDupeFilter,
        config: FrontierConfig,
        steps: FrontierSteps,
    ) -> None:
        super().__init__(
            server=redis.client,
            persist=config.persist,
            flush_on_start=config.flush_on_start,
            queue_key=redis.keys.hosts,
            queue_cls="spiders_project.frontier.queue.JsonPriorityQueue",
            dupefilter=dupefilter,
            dupefilter_key=redis.keys.dupefilter,
            serializer=serialize,
        )
        self.crawler = crawler
        self.stats = crawler.stats
        self.redis = redis
        self.keys = redis.keys
        self.config = config
        # What features do to a request on its way in (FRONTIER_STEPS).
        self.steps = steps
        self.leases = LeaseKeeper(redis, int(config.lease_timeout * 1000), self.stats)
        self.lease_ms = self.leases.lease_ms
        self.bad_entries = BadEntries(redis, self.stats)
        self.counts = Reconciler(redis, self.stats)
        self.taker = LeaseTaker(redis, config, self.bad_entries, steps.delay_ms, self.lease_ms)
        self._want = asyncio.Event()
        # The leases' slots between downloads, and the spare leases to take them.
        self.spares = Spares(config.spares, config.per_host)
        limit = config.concurrency + config.prefetch + config.spares
        self.handoff = SlotHandoff(
            crawler, self.spares, redis.batcher, self.leases, limit, self._want
        )
        self._prefetched, self._active = self.handoff.prefetched, self.handoff.active
        self._released, self._at_cap = self.handoff.released, self.handoff.at_cap
        self._tasks: list[asyncio.Task[None]] = []
        self.remote_size = 0
        self.sent = SentFingerprints(config.seen_cache, redis.seen.recrawl_after or None)
        self.seen_guard = SeenGuard(redis, self.sent, self.stats)
        redis.batcher.enqueued.subscribe(self._count_enqueued)
        redis.batcher.slots_freed.subscribe(self._want.set)
        self.handoff.connect(crawler.signals)  # downloads ended, pages, items, outcomes
        crawler.signals.connect(RefusedLinks(self).refused, signal=link_refused)
        # A pause that may last (node health): what was leased and not started goes back.
        pauses = EnginePauses.of(crawler)
        pauses.given_back.subscribe(self._give_back_unstarted)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> FrontierScheduler:
        settings = crawler.settings
        # What a worker must not start with (spiders_project/addon/checks.py):
        # `scrapy crawl` refuses it with one line each before anything starts;
        # this catches crawls started otherwise (CrawlerProcess).
        problems = start_problems(settings)
        if problems:
            raise NotConfigured("; ".join(problems))
        return cls(
            crawler,
            WorkerRedis.of(crawler),
            FingerprintDupeFilter.from_crawler(crawler),
            FrontierConfig.from_settings(settings),
            FrontierSteps.of(crawler),
        )

    # Base.clear would call the asyncio client synchronously: nothing would be deleted.
    flush = not_here(
        "Scheduler.flush",
        "set SCHEDULER_FLUSH_ON_START, or delete the spider's keys while no worker runs",
    )

    # --- lifecycle --------------------------------------------------------------
    def open(self, spider: Spider) -> Deferred[None]:
        self.spider = spider
        self.queue = JsonPriorityQueue(
            self.server, spider, self.queue_key, self.serializer, ValueCodec.of(self.crawler)
        )
        return deferred_from_coro(self._open())

    async def _open(self) -> None:
        if self.flush_on_start:
            await clear_frontier(self.redis, self.sent)
            logger.warning(
                "SCHEDULER_FLUSH_ON_START: emptied the frontier and the dupefilter of %s",
                self.spider.name,
            )
        self.remote_size = await self.redis.frontier_size()
        await self.seen_guard.check_mode()
        with contextlib.suppress(RedisUnavailable):
            # Both again in the lease loop.
            await self.seen_guard.check_run_id()
            await self.redis.sync_time()
        logger.info(
            "Connected to Redis at %s (%d requests queued)", self.redis.state.url, self.remote_size
        )
        self.redis.batcher.before_flush.subscribe(self._ack_finished)
        self.redis.batcher.start()
        self._tasks = [
            spawn_loop("frontier refill", self._refill_loop()),
            spawn_loop("frontier leases", self._lease_loop()),
        ]
        self._want.set()

    def close(self, reason: str) -> Deferred[None]:
        return deferred_from_coro(self._close(reason))

    async def _close(self, reason: str) -> None:
        started, unstarted = await self.hand_back()
        logger.info(
            "Frontier closed (%s): %d unfinished requests handed back to the queue, "
            "%d leased and not started",
            reason,
            started,
            unstarted,
        )
        if not self.persist:
            await clear_frontier(self.redis, self.sent)
        await self.redis.aclose()

    async def hand_back(self) -> tuple[int, int]:
        """Write everything pending, then return every unfinished lease to its queue.

        Requests the engine finished are acknowledged first (their items and
        links are in the same writes); the rest go back to their host queues
        for another worker. Returns how many went back: those the engine had
        started (in flight, cut off), and those leased and never started
        (prefetched, spares, a lease call's reply), which a drain leaves as a
        matter of course.
        """
        await stop_tasks(self._tasks)
        self._tasks = []
        self.handoff.settle(self.spares.parked(), release=True)
        self._ack_finished()
        started = list(self._active.values())
        unstarted = [lease for _, lease in self._prefetched]
        unstarted += [lease for _, lease in self.spares.take_all()]
        unstarted += await self.leases.of_call(self.taker.in_flight, self.config.close_timeout)
        self._prefetched.clear()
        self._active.clear()
        self._released.clear()
        self._at_cap.clear()
        delivered = await self.redis.batcher.close(self.config.close_timeout)
        if not delivered:
            return 0, 0
        timeout = self.config.close_timeout
        return (
            await self.leases.hand_back(started, timeout) if started else 0,
            await self.leases.hand_back(unstarted, timeout) if unstarted else 0,
        )

    # --- Scrapy's scheduler interface -----------------------------------------------
    def enqueue_request(self, request: Request) -> bool:
        """Run the request through the steps, the seen-cache and the encoder, then hand
        it to the write batcher: deduplicated and queued in Redis, a batch per tick."""
        entry = Enqueue()
        admitted = self.steps.admit(request, entry)
        if admitted is None:
            return False
        request = admitted
        seen = self.redis.seen
        # The worker's pre-filter holds a fingerprint up to RECRAWL_AFTER (its
        # generations turn every half of it), so a shorter recrawl interval's
        # own is not held there at all; 0 (never again) is held like the longest.
        prefilter = not entry.recrawl_after or entry.recrawl_after >= seen.recrawl_after
        raw = None
        if not request.dont_filter or entry.record:
            raw = self.df.fingerprint(request)
            if prefilter and not request.dont_filter and not entry.seed_entry and raw in self.sent:
                # Already sent to the shared dupefilter by this worker.
                self.stats.inc_value("dupefilter/filtered")
                return False
        self.steps.route(request, entry)
        try:
            priority, payload = self.queue.encode(request)
        except InvalidEntry as exc:
            self.bad_entries.unserializable(request, exc)
            if entry.seed_entry:
                self.redis.batcher.reject_seed(entry.seed_entry, f"cannot be stored: {exc}")
            return False
        if raw is None:
            fingerprint = ""
        else:
            if prefilter:
                self.sent.add(raw)
            token = seen.token(
                raw, legacy=self.seen_guard.legacy_seen, recrawl_after=entry.recrawl_after
            )
            fingerprint = ("!" if request.dont_filter else "") + token
        self.redis.batcher.enqueue(
            self.steps.group_of(request.url),
            fingerprint,
            priority,
            payload,
            entry.seed_entry,
            entry.wait_ms,
            entry.lane,
        )
        self.stats.inc_value("scheduler/enqueued/redis")
        return True

    def next_request(self) -> Request | None:
        self._want.set()
        while self._prefetched:
            request, lease = self._prefetched.popleft()
            kept = self.steps.leased(request)
            if kept is None:  # a step dropped it (and counted why): no fetch, lease ended
                self.handoff.dropped(lease)
                continue
            if isinstance(kept, Hold):  # a paused job's: back to its queue, unfetched
                self.handoff.hold(request, lease)
                continue
            self._active[kept] = lease
            self.stats.inc_value("scheduler/dequeued/redis")
            return kept
        return None

    def has_pending_requests(self) -> bool:
        return bool(self._prefetched or self.spares) or self.redis.batcher.has_pending_requests()

    def __len__(self) -> int:
        return len(self._prefetched) + len(self.spares) + self.remote_size

    def is_idle(self) -> bool:
        """Nothing prefetched, in flight, or waiting to be written."""
        return not (self._prefetched or self._active or self.spares or len(self.redis.batcher))

    def _count_enqueued(self, sent: int, added: int) -> None:
        if added:
            self.taker.wake()
            self._want.set()  # new work may be ready for us
        if sent > added:
            self.stats.inc_value("dupefilter/filtered", sent - added)

    def _give_back_unstarted(self) -> None:
        """A pause that may last: what was leased and not started goes back."""
        self.leases.give_back(deque(self.handoff.unstarted()))

    def _ack_finished(self) -> None:
        self.handoff.ack_finished()

    def _wanted(self) -> int:
        """How many requests to lease now: a worker holds at most CONCURRENT_REQUESTS +
        FRONTIER_PREFETCH leases (+ FRONTIER_SPARES: handoff.py), so a killed worker
        costs at most that many re-fetches."""
        engine = self.crawler.engine
        if engine is None or engine.paused or not engine.running:
            return 0
        self._ack_finished()
        held = len(self._active) + len(self._prefetched)
        return self.config.concurrency + self.config.prefetch - held

    async def _refill_loop(self) -> None:
        """Lease what the engine wants, from each of its queues in turn (each
        shard's, in the lanes of WORKER_ROLE), and sleep while nothing is ready
        anywhere."""
        shards = self.redis.queue_calls(self.config.lanes)
        turn = 0
        while True:
            await self._want.wait()
            self._want.clear()
            leased = more = False
            waits: list[int] = []
            backoff = 0.0
            for i in range(len(shards)):
                wanted = self._wanted()
                spares = self.spares.wanted(self.steps.delay_ms)
                if wanted <= 0 and not spares:
                    self.handoff.settle(self.spares.parked())  # no spare is coming for them
                    break
                keys, calls = shards[(turn + i) % len(shards)]
                if not self.taker.due(keys):
                    continue
                parked = self.spares.parked()
                try:
                    taken = await self.taker.take(
                        keys, calls, max(wanted, 0), self.queue, spares, self.spares.recent()
                    )
                except RedisUnavailable as exc:
                    backoff = max(backoff, exc.delay)
                    continue
                for request, lease, at_cap in taken.requests:
                    self._prefetched.append((request, lease))
                    self.handoff.took(lease)
                    if at_cap:
                        self._at_cap.add(lease.id)
                        self.spares.capped(lease.host)
                self.handoff.leased(taken, parked)
                if taken.requests:
                    internals.wake_engine(self.crawler.engine)
                leased |= taken.leased > 0
                more |= taken.more
                if taken.wait_ms >= 0:
                    waits.append(taken.wait_ms)
            turn += 1
            if backoff and not leased:
                await asyncio.sleep(backoff)
                self._want.set()
            elif more:
                self._want.set()  # more hosts are ready: ask again
            elif not leased and self._wanted() > 0:
                # Nothing ready: sleep until the next host's turn, or poll.
                poll = self.config.empty_poll_interval
                delay = min(min(waits) / 1000, poll) if waits else poll
                await wait_event(self._want, max(delay, 0.001))
                self._want.set()

    async def _lease_loop(self) -> None:
        """Renew our leases, put back expired ones, correct an empty frontier's counts while
        we hold nothing (reconcile.py), notice a Redis that changed, measure our clock."""
        while True:
            await asyncio.sleep(self.config.renew_interval)
            try:
                await self.leases.renew(self.handoff.held())
                moved = await self.leases.reclaim_expired()
                corrected = await self.counts.reconcile() if self.is_idle() else 0
                await self.seen_guard.check_run_id()
                await self.redis.sync_time()
                if self.seen_guard.legacy_seen:
                    await self.seen_guard.check_legacy()
            except RedisUnavailable:
                continue  # the call path logged it; try again next period
            if moved or corrected:  # requests back, or hosts back in the ready-set
                self.taker.wake()
                self._want.set()
