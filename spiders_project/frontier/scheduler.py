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
  the same transaction as those items and links. A live worker renews its
  leases; leases of a dead worker expire and any worker puts them back.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque

from scrapy import Request, Spider
from scrapy.crawler import Crawler
from scrapy.utils.defer import deferred_from_coro
from scrapy_redis.scheduler import Scheduler
from twisted.internet.defer import Deferred

from spiders_project.frontier import serialize
from spiders_project.frontier.calls import expired_call, lease_call, requeue_call
from spiders_project.frontier.context import WorkerRedis
from spiders_project.frontier.dupefilter import FingerprintDupeFilter, SentFingerprints
from spiders_project.frontier.politeness import HostPoliteness, host_of
from spiders_project.frontier.queue import JsonPriorityQueue
from spiders_project.frontier.serialize import InvalidEntry
from spiders_project.frontier.tasks import stop_tasks, wait_event
from spiders_project.redis_connection import CONNECTION_ERRORS

logger = logging.getLogger(__name__)

# Request meta key of a seed's raw start_urls entry (bytes as latin-1 text).
SEED_ENTRY = "_seed_entry"

# A leased request and the host whose queue it came from.
Lease = tuple[bytes, str]

# How long an empty refill waits before asking Redis again.
EMPTY_POLL_INTERVAL = 0.25


class FrontierScheduler(Scheduler):
    """Shared Redis frontier with leases; see the module docstring."""

    def __init__(
        self,
        crawler: Crawler,
        redis: WorkerRedis,
        dupefilter: FingerprintDupeFilter,
        *,
        concurrency: int,
        per_host: int,
        prefetch: int,
        lease_timeout: float,
        close_timeout: float,
        politeness: HostPoliteness,
        persist: bool = True,
        seen_cache: int = 0,
    ) -> None:
        super().__init__(
            server=redis.client,
            persist=persist,
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
        self.concurrency = concurrency
        self.per_host = per_host
        self.prefetch = prefetch
        self.politeness = politeness
        self._candidates: list[str] = []
        self.lease_ms = int(lease_timeout * 1000)
        self.renew_interval = lease_timeout / 3
        self.close_timeout = close_timeout
        self._prefetched: deque[tuple[Request, Lease]] = deque()
        self._active: dict[Request, Lease] = {}
        self._want = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self.remote_size = 0
        self.sent = SentFingerprints(seen_cache)
        redis.batcher.on_enqueued = self._count_enqueued

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> FrontierScheduler:
        settings = crawler.settings
        return cls(
            crawler,
            WorkerRedis.of(crawler),
            FingerprintDupeFilter.from_crawler(crawler),
            concurrency=max(1, settings.getint("CONCURRENT_REQUESTS")),
            per_host=max(1, settings.getint("CONCURRENT_REQUESTS_PER_DOMAIN")),
            prefetch=settings.getint("FRONTIER_PREFETCH"),
            politeness=HostPoliteness.of(crawler),
            lease_timeout=settings.getfloat("FRONTIER_LEASE_TIMEOUT"),
            close_timeout=settings.getfloat("FRONTIER_CLOSE_TIMEOUT"),
            persist=settings.getbool("SCHEDULER_PERSIST"),
            seen_cache=settings.getint("FRONTIER_SEEN_CACHE"),
        )

    # --- lifecycle --------------------------------------------------------------
    def open(self, spider: Spider) -> Deferred[None]:
        self.spider = spider
        self.queue = JsonPriorityQueue(self.server, spider, self.queue_key, self.serializer)
        return deferred_from_coro(self._open())

    async def _open(self) -> None:
        if self.flush_on_start:
            await self._clear_frontier()
        self.redis.round_trip()
        self.remote_size = int(await self.redis.client.get(self.keys.requests_size) or 0)
        logger.info(
            "Connected to Redis at %s (%d requests queued)", self.redis.state.url, self.remote_size
        )
        self.redis.batcher.before_flush = self._ack_finished
        self.redis.batcher.start()
        self._tasks = [
            asyncio.ensure_future(self._refill_loop()),
            asyncio.ensure_future(self._lease_loop()),
        ]
        self._want.set()

    def close(self, reason: str) -> Deferred[None]:
        return deferred_from_coro(self._close(reason))

    async def _close(self, reason: str) -> None:
        returned = await self.hand_back()
        logger.info(
            "Frontier closed (%s): %d unfinished requests handed back to the queue",
            reason,
            returned,
        )
        if not self.persist:
            await self._clear_frontier()
        await self.redis.client.aclose()

    async def hand_back(self) -> int:
        """Write everything pending, then return every unfinished lease to its queue.

        Requests the engine finished are acknowledged first (their items and
        links are in the same writes); the rest, prefetched or still in
        flight, go back to their host queues for another worker. Returns how
        many went back.
        """
        await stop_tasks(self._tasks)
        self._ack_finished()
        unfinished = [lease for _, lease in self._prefetched] + list(self._active.values())
        self._prefetched.clear()
        self._active.clear()
        delivered = await self.redis.batcher.close(self.close_timeout)
        if unfinished and delivered:
            return await self._requeue(unfinished)
        return 0

    async def _clear_frontier(self) -> None:
        """Forget every queued and leased request and every fingerprint."""
        keys = self.keys
        self.redis.round_trip()
        hosts = await self.redis.client.zrange(keys.hosts, 0, -1)
        self.redis.round_trip()
        await self.redis.client.delete(
            *(keys.host_queue(h.decode()) for h in hosts),
            keys.hosts,
            keys.requests_size,
            keys.leases,
            keys.lease_info,
            keys.dupefilter,
        )

    async def _requeue(self, leases: list[Lease]) -> int:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.close_timeout
        keys, args = requeue_call(self.keys, leases)
        while True:
            try:
                self.redis.round_trip()
                result = await self.redis.scripts.requeue(keys=keys, args=args)
            except CONNECTION_ERRORS as exc:
                delay = self.redis.state.failed(exc)
                if loop.time() + delay > deadline:
                    logger.error(
                        "Could not hand back %d leases; they expire and return", len(leases)
                    )
                    return 0
                await asyncio.sleep(delay)
                continue
            self.redis.state.ok()
            return int(result)

    # --- Scrapy's scheduler interface -----------------------------------------------
    def enqueue_request(self, request: Request) -> bool:
        # A seed carries its raw start_urls entry, claimed in the same script
        # that enqueues it (never stored with the request).
        seed_entry = request.meta.pop(SEED_ENTRY, "").encode("latin-1")
        raw = None
        if not request.dont_filter or request.meta.get("seed"):
            raw = self.df.fingerprint(request)
            if not request.dont_filter and not seed_entry and raw in self.sent:
                # Already sent to the shared dupefilter by this worker.
                self.stats.inc_value("dupefilter/filtered")
                return False
        try:
            priority, payload = self.queue.encode(request)
        except InvalidEntry as exc:
            logger.error("Dropped %s: %s", request, exc)
            self.stats.inc_value("frontier/unserializable")
            if seed_entry:
                self.redis.batcher.reject_seed(seed_entry)
            return False
        if raw is None:
            fingerprint = ""
        else:
            self.sent.add(raw)
            fingerprint = ("!" if request.dont_filter else "") + raw.hex()
        self.redis.batcher.enqueue(host_of(request.url), fingerprint, priority, payload, seed_entry)
        self.stats.inc_value("scheduler/enqueued/redis")
        return True

    def next_request(self) -> Request | None:
        if not self._prefetched:
            self._want.set()
            return None
        request, lease = self._prefetched.popleft()
        self._active[request] = lease
        self._want.set()
        self.stats.inc_value("scheduler/dequeued/redis")
        return request

    def has_pending_requests(self) -> bool:
        return bool(self._prefetched) or self.redis.batcher.has_pending_requests()

    def __len__(self) -> int:
        return len(self._prefetched) + self.remote_size

    def is_idle(self) -> bool:
        """Nothing prefetched, in flight, or waiting to be written."""
        return not self._prefetched and not self._active and not len(self.redis.batcher)

    # --- background work ---------------------------------------------------------------
    def _count_enqueued(self, sent: int, added: int) -> None:
        if added:
            self._want.set()  # new work may be ready for us
        if sent > added:
            self.stats.inc_value("dupefilter/filtered", sent - added)

    def _ack_finished(self) -> None:
        """Queue the ack of every leased request the engine is done with.

        Scrapy has no signal for "this request is fully processed" (response
        scraped, its items through the pipelines, its links scheduled, or the
        download failed for good, retries and redirects included). The
        engine's slot keeps exactly that set in ``inprogress``; a request we
        handed out that is no longer there is finished.
        """
        if not self._active:
            return
        slot = getattr(self.crawler.engine, "_slot", None)
        inprogress = slot.inprogress if slot is not None else set()
        done = [request for request in self._active if request not in inprogress]
        for request in done:
            self.redis.batcher.ack(self._active.pop(request)[0])
        if done:
            self._want.set()  # their slots are free for new leases

    def _wake_engine(self) -> None:
        # The engine otherwise polls an empty scheduler only every 5 s.
        slot = getattr(self.crawler.engine, "_slot", None)
        if slot is not None:
            slot.nextcall.schedule()

    def _wanted(self) -> int:
        """How many requests to lease now.

        A worker holds at most CONCURRENT_REQUESTS + FRONTIER_PREFETCH leases
        (prefetched, downloading or being scraped), so a killed worker costs
        at most that many re-fetches.
        """
        engine = self.crawler.engine
        if engine is None or engine.paused or not engine.running:
            return 0
        self._ack_finished()
        held = len(self._active) + len(self._prefetched)
        return self.concurrency + self.prefetch - held

    async def _refill_loop(self) -> None:
        state = self.redis.state
        while True:
            await self._want.wait()
            self._want.clear()
            wanted = self._wanted()
            if wanted <= 0:
                continue
            candidates = [(h, self.politeness.delay_ms(h)) for h in self._candidates]
            keys, args = lease_call(
                self.keys,
                wanted,
                self.lease_ms,
                candidates,
                next_hosts=max(8, 2 * self.concurrency),
                per_host=self.per_host,
            )
            try:
                self.redis.round_trip()
                leased, self._candidates, wait_ms = await self.redis.scripts.lease(
                    keys=keys, args=args
                )
            except CONNECTION_ERRORS as exc:
                await asyncio.sleep(state.failed(exc))
                self._want.set()
                continue
            state.ok()
            self._candidates = [h.decode() for h in self._candidates]
            added = 0
            for member, host in zip(leased[::2], leased[1::2], strict=True):
                lease = (member, host.decode())
                try:
                    request = self.queue.decode(member)
                except InvalidEntry as exc:
                    logger.warning("Rejected a frontier entry (%s): %.200r", exc, member)
                    self.stats.inc_value("frontier/rejected")
                    self.redis.batcher.push(self.keys.requests_rejected, member)
                    self.redis.batcher.ack(member)
                    continue
                self._prefetched.append((request, lease))
                added += 1
            if added:
                self._wake_engine()
            if self._candidates:
                self._want.set()  # more hosts are ready: ask again
            elif not leased:
                # Nothing ready: sleep until the next host's turn, or poll.
                delay = (
                    EMPTY_POLL_INTERVAL if wait_ms < 0 else min(wait_ms / 1000, EMPTY_POLL_INTERVAL)
                )
                await wait_event(self._want, max(delay, 0.001))
                self._want.set()

    async def _lease_loop(self) -> None:
        """Renew our leases and put back the expired leases of dead workers."""
        while True:
            await asyncio.sleep(self.renew_interval)
            members = [lease[0] for _, lease in self._prefetched]
            members += [lease[0] for lease in self._active.values()]
            try:
                if members:
                    self.redis.round_trip()
                    await self.redis.scripts.renew(
                        keys=[self.keys.leases], args=[self.lease_ms, *members]
                    )
                moved = await self.reclaim_expired()
            except CONNECTION_ERRORS as exc:
                self.redis.state.failed(exc)
                continue
            if moved:
                logger.warning("Put back %d expired leases of a stopped worker", moved)
                self.stats.inc_value("frontier/leases_reclaimed", moved)
                self._want.set()

    async def reclaim_expired(self, limit: int = 1000) -> int:
        """Return expired leases to their queues; several workers may race safely."""
        keys, args = expired_call(self.keys, limit)
        self.redis.round_trip()
        found = await self.redis.scripts.expired(keys=keys, args=args)
        if not found:
            return 0
        leases = [(m, h.decode()) for m, h in zip(found[::2], found[1::2], strict=True)]
        keys, args = requeue_call(self.keys, leases)
        self.redis.round_trip()
        return int(await self.redis.scripts.requeue(keys=keys, args=args))
