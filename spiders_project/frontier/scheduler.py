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
from typing import Any

from scrapy import Request, Spider
from scrapy.crawler import Crawler
from scrapy.utils.defer import deferred_from_coro
from scrapy_redis.scheduler import Scheduler
from twisted.internet.defer import Deferred

from spiders_project.frontier import serialize
from spiders_project.frontier.context import WorkerRedis
from spiders_project.frontier.dupefilter import FingerprintDupeFilter
from spiders_project.frontier.queue import JsonPriorityQueue
from spiders_project.frontier.serialize import InvalidEntry
from spiders_project.redis_connection import CONNECTION_ERRORS

logger = logging.getLogger(__name__)

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
        prefetch: int,
        lease_timeout: float,
        close_timeout: float,
        persist: bool = True,
    ) -> None:
        super().__init__(
            server=redis.client,
            persist=persist,
            queue_key=redis.keys.requests,
            queue_cls="spiders_project.frontier.queue.JsonPriorityQueue",
            dupefilter=dupefilter,
            dupefilter_key=redis.keys.dupefilter,
            serializer=serialize,
        )
        self.crawler = crawler
        self.stats = crawler.stats
        self.redis = redis
        self.keys = redis.keys
        self.prefetch = prefetch
        self.lease_ms = int(lease_timeout * 1000)
        self.renew_interval = lease_timeout / 3
        self.close_timeout = close_timeout
        self._prefetched: deque[tuple[Request, bytes]] = deque()
        self._active: dict[Request, bytes] = {}
        self._want = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self.remote_size = 0
        redis.batcher.on_enqueued = self._count_enqueued

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> FrontierScheduler:
        settings = crawler.settings
        prefetch = settings.getint("FRONTIER_PREFETCH") or settings.getint("CONCURRENT_REQUESTS")
        return cls(
            crawler,
            WorkerRedis.of(crawler),
            FingerprintDupeFilter.from_crawler(crawler),
            prefetch=max(1, prefetch),
            lease_timeout=settings.getfloat("FRONTIER_LEASE_TIMEOUT"),
            close_timeout=settings.getfloat("FRONTIER_CLOSE_TIMEOUT"),
            persist=settings.getbool("SCHEDULER_PERSIST"),
        )

    # --- lifecycle --------------------------------------------------------------
    def open(self, spider: Spider) -> Deferred[None]:
        self.spider = spider
        self.queue = JsonPriorityQueue(self.server, spider, self.queue_key, self.serializer)
        return deferred_from_coro(self._open())

    async def _open(self) -> None:
        if self.flush_on_start:
            await self.redis.client.delete(self.keys.requests, self.keys.dupefilter)
        self.remote_size = await self.redis.client.zcard(self.keys.requests)
        if self.remote_size:
            logger.info("Resuming crawl (%d requests queued)", self.remote_size)
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
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._ack_finished()
        unfinished = [m for _, m in self._prefetched] + list(self._active.values())
        self._prefetched.clear()
        self._active.clear()
        batcher = self.redis.batcher
        delivered = await batcher.close(self.close_timeout)
        returned = 0
        if unfinished and delivered:
            returned = await self._requeue(unfinished)
        logger.info(
            "Frontier closed (%s): %d unfinished requests handed back to the queue",
            reason, returned,
        )
        if not self.persist:
            await self.redis.client.delete(self.keys.requests, self.keys.dupefilter)
        await self.redis.client.aclose()

    async def _requeue(self, members: list[bytes]) -> int:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.close_timeout
        while True:
            try:
                result = await self.redis.scripts.requeue(
                    keys=[self.keys.requests, self.keys.leases, self.keys.lease_scores],
                    args=[0, *members],
                )
            except CONNECTION_ERRORS as exc:
                delay = self.redis.state.failed(exc)
                if loop.time() + delay > deadline:
                    logger.error("Could not hand back %d leases; they expire and return", len(members))
                    return 0
                await asyncio.sleep(delay)
                continue
            self.redis.state.ok()
            return int(result)

    # --- Scrapy's scheduler interface -----------------------------------------------
    def enqueue_request(self, request: Request) -> bool:
        try:
            priority, payload = self.queue.encode(request)
        except InvalidEntry as exc:
            logger.error("Dropped %s: %s", request, exc)
            self.stats.inc_value("frontier/unserializable")
            return False
        if request.dont_filter:
            fingerprint = "!" + self.df.request_fingerprint(request) if request.meta.get(
                "seed") else ""
        else:
            fingerprint = self.df.request_fingerprint(request)
        self.redis.batcher.enqueue(fingerprint, priority, payload)
        self.stats.inc_value("scheduler/enqueued/redis")
        return True

    def next_request(self) -> Request | None:
        if len(self._prefetched) <= self.prefetch // 2:
            self._want.set()
        if not self._prefetched:
            return None
        request, member = self._prefetched.popleft()
        self._active[request] = member
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
            self.redis.batcher.ack(self._active.pop(request))

    def _wake_engine(self) -> None:
        # The engine otherwise polls an empty scheduler only every 5 s.
        slot = getattr(self.crawler.engine, "_slot", None)
        if slot is not None:
            slot.nextcall.schedule()

    async def _refill_loop(self) -> None:
        state = self.redis.state
        while True:
            await self._want.wait()
            self._want.clear()
            wanted = self.prefetch - len(self._prefetched)
            if wanted <= 0:
                continue
            try:
                result = await self.redis.scripts.lease(
                    keys=[self.keys.requests, self.keys.leases, self.keys.lease_scores],
                    args=[wanted, self.lease_ms],
                )
            except CONNECTION_ERRORS as exc:
                await asyncio.sleep(state.failed(exc))
                self._want.set()
                continue
            state.ok()
            self.remote_size = int(result[0])
            added = 0
            for member in result[1:]:
                try:
                    request = self.queue.decode(member)
                except InvalidEntry as exc:
                    logger.warning("Rejected a frontier entry (%s): %.200r", exc, member)
                    self.stats.inc_value("frontier/rejected")
                    self.redis.batcher.push(self.keys.requests_rejected, member)
                    self.redis.batcher.ack(member)
                    continue
                self._prefetched.append((request, member))
                added += 1
            if added:
                self._wake_engine()
            if len(result) == 1:
                # Empty: look again soon, even if the engine does not ask.
                await asyncio.sleep(EMPTY_POLL_INTERVAL)
                if len(self._prefetched) <= self.prefetch // 2:
                    self._want.set()

    async def _lease_loop(self) -> None:
        """Renew our leases and put back the expired leases of dead workers."""
        keys = [self.keys.requests, self.keys.leases, self.keys.lease_scores]
        while True:
            await asyncio.sleep(self.renew_interval)
            members = [m for _, m in self._prefetched] + list(self._active.values())
            try:
                if members:
                    await self.redis.scripts.renew(
                        keys=[self.keys.leases], args=[self.lease_ms, *members]
                    )
                moved = await self.redis.scripts.requeue(keys=keys, args=[1000])
            except CONNECTION_ERRORS as exc:
                self.redis.state.failed(exc)
                continue
            if moved:
                logger.warning("Put back %d expired leases of a stopped worker", moved)
                self.stats.inc_value("frontier/leases_reclaimed", int(moved))
                self._want.set()

    def queue_state(self) -> dict[str, Any]:
        return {
            "prefetched": len(self._prefetched),
            "active": len(self._active),
            "pending_writes": len(self.redis.batcher),
        }
