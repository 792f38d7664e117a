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
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from typing import Any

from scrapy import Request, Spider, signals
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured
from scrapy.utils.defer import deferred_from_coro
from scrapy_redis.scheduler import Scheduler
from twisted.internet.defer import Deferred

from spiders_project import internals
from spiders_project.frontier.bad_entries import BadEntries
from spiders_project.frontier.dupefilter import FingerprintDupeFilter, SentFingerprints
from spiders_project.frontier.leases import Lease, LeaseKeeper
from spiders_project.frontier.queue import JsonPriorityQueue
from spiders_project.keys import RedisKeys
from spiders_project.meta import RETRY_WAIT, SCOPE_META, SEED_ENTRY
from spiders_project.politeness.delays import HostPoliteness
from spiders_project.proxies.middleware import forget_proxy
from spiders_project.redis_calls import RedisCalls, RedisUnavailable
from spiders_project.rendering.routing import RenderRouting
from spiders_project.runtime import serialize
from spiders_project.runtime.calls import lease_call
from spiders_project.runtime.config import FrontierConfig
from spiders_project.runtime.context import WorkerRedis
from spiders_project.runtime.seen import mode_mismatch
from spiders_project.runtime.serialize import InvalidEntry
from spiders_project.runtime.tasks import spawn_loop, stop_tasks, wait_event
from spiders_project.runtime.values import ValueCodec
from spiders_project.scope.urls import UrlRules
from spiders_project.scrapy_redis_compat import not_here, setting_problems
from spiders_project.seeds import seed_reached

logger = logging.getLogger(__name__)


class FrontierScheduler(Scheduler):  # type: ignore[misc]  # scrapy-redis ships no types
    """Shared Redis frontier with leases; see the module docstring."""

    def __init__(
        self,
        crawler: Crawler,
        redis: WorkerRedis,
        dupefilter: FingerprintDupeFilter,
        config: FrontierConfig,
        politeness: HostPoliteness,
        urls: UrlRules,
        render: RenderRouting,
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
        self.politeness = politeness
        self.urls = urls
        # Which requests render, and so go to the frontier's render queue.
        self.render = render
        # Hosts the last lease call of each queue (by lane prefix) named ready.
        self._candidates: dict[str, list[str]] = {}
        self.lease_ms = int(config.lease_timeout * 1000)
        self.leases = LeaseKeeper(redis, self.lease_ms, self.stats)
        self.bad_entries = BadEntries(redis, self.stats)
        self._prefetched: deque[tuple[Request, Lease]] = deque()
        self._active: dict[Request, Lease] = {}
        # Lease ids whose cap slot was given back (download ended), and those
        # whose host was at its cap when leased (their release is urgent).
        self._released: set[bytes] = set()
        self._at_cap: set[bytes] = set()
        self._want = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self.remote_size = 0
        self.sent = SentFingerprints(config.seen_cache, redis.seen.recrawl_after or None)
        self._next_lease_id = 0
        self._leasing: asyncio.Future[Any] | None = None  # the lease call in flight
        self._run_id: str | None = None
        # Whether the previous release's set of hex fingerprints still exists
        # (until `scrapy dupefilter migrate` empties it): links then carry
        # their hex too, for enqueue.lua to look there.
        self._legacy_seen = True
        redis.batcher.enqueued.subscribe(self._count_enqueued)
        redis.batcher.slots_freed.subscribe(self._want.set)
        crawler.signals.connect(self._download_ended, signal=signals.request_left_downloader)
        redis.state.on_reconnect.append(lambda: self._forget_sent("reconnected"))

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> FrontierScheduler:
        settings = crawler.settings
        # scrapy-redis' settings that this frontier does not honour (or fixes):
        # `scrapy crawl` refuses them with one line each before anything starts;
        # this catches crawls started otherwise (CrawlerProcess).
        problems = setting_problems(settings)
        if problems:
            raise NotConfigured("; ".join(problems))
        return cls(
            crawler,
            WorkerRedis.of(crawler),
            FingerprintDupeFilter.from_crawler(crawler),
            FrontierConfig.from_settings(settings),
            HostPoliteness.of(crawler),
            UrlRules.from_settings(settings),
            RenderRouting.of(crawler),
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
            await self._clear_frontier()
            logger.warning(
                "SCHEDULER_FLUSH_ON_START: emptied the frontier and the dupefilter of %s",
                self.spider.name,
            )
        self.remote_size = await self.redis.frontier_size()
        await self._check_seen_mode()
        with contextlib.suppress(RedisUnavailable):
            await self._check_run_id()  # the lease loop checks again
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
        returned = await self.hand_back()
        logger.info(
            "Frontier closed (%s): %d unfinished requests handed back to the queue",
            reason,
            returned,
        )
        if not self.persist:
            await self._clear_frontier()
        await self.redis.aclose()

    async def hand_back(self) -> int:
        """Write everything pending, then return every unfinished lease to its queue.

        Requests the engine finished are acknowledged first (their items and
        links are in the same writes); the rest, prefetched or still in
        flight, go back to their host queues for another worker. Returns how
        many went back.
        """
        await stop_tasks(self._tasks)
        self._tasks = []
        self._ack_finished()
        unfinished = [lease for _, lease in self._prefetched] + list(self._active.values())
        unfinished += await self.leases.of_call(self._leasing, self.config.close_timeout)
        self._prefetched.clear()
        self._active.clear()
        self._released.clear()
        self._at_cap.clear()
        delivered = await self.redis.batcher.close(self.config.close_timeout)
        if unfinished and delivered:
            return await self.leases.hand_back(unfinished, self.config.close_timeout)
        return 0

    async def _clear_frontier(self) -> None:
        """Forget every queued and leased request and every fingerprint (every shard)."""
        await self.redis.per_shard(self._clear_shard)
        self.sent.clear()

    async def _clear_shard(self, keys: RedisKeys, calls: RedisCalls) -> None:
        """Forget one shard's queued and leased requests (both lanes) and fingerprints.

        Host queues are found through the ready-set and the hosts at their
        cap: the lease script forgets a host only once its queue is empty
        (leased requests go with the leases, deleted whole).
        """
        client = calls.client
        doomed = [keys.requests_seq, keys.dupefilter, keys.seen]
        for lane in keys.all_lanes:  # the HTTP queue and the render queue
            hosts = await calls.command("ZRANGE", lane.hosts, 0, -1, writes=False)
            hosts += await calls.command("HKEYS", lane.cap_waiters, writes=False)  # out of it
            names = {h.decode("utf-8", "replace") for h in hosts}
            doomed += [
                *(lane.host_queue(h) for h in names),
                *(lane.host_later(h) for h in names),
                *(lane.host_list(h) for h in names),
                lane.in_flight,
                lane.cap_waiters,
                lane.cap_handover,
                lane.released,
                lane.hosts,
                lane.requests_size,
                lane.leases,
                lane.lease_info,
            ]
        await calls.call("DEL frontier", lambda: client.delete(*doomed))
        # The seen-set's buckets (or Bloom blocks) and its recorded mode.
        cursor: int = 0
        while True:
            cursor, found = await calls.command(
                "SCAN", cursor, "MATCH", keys.seen_parts, "COUNT", 1000, writes=False
            )
            if found:
                await calls.command("UNLINK", *found)
            if not int(cursor):
                break

    # --- Scrapy's scheduler interface -----------------------------------------------
    def enqueue_request(self, request: Request) -> bool:
        # A seed carries its raw start_urls entry, claimed in the same script
        # that enqueues it (never stored with the request).
        seed_entry = request.meta.pop(SEED_ENTRY, "").encode("latin-1")
        if seed_entry:
            self.crawler.signals.send_catch_log(seed_reached, entry=seed_entry)
        # One URL, one fetch: normalised before fingerprinting (scope/urls.py).
        scope = request.meta.get(SCOPE_META)
        url = self.urls.normalise(request.url, not scope or scope.get("strip_params", True))
        if url != request.url:
            request = request.replace(url=url)
        if not seed_entry:
            trap = self.urls.trap(url)
            if trap is not None:
                self.stats.inc_value(f"scope/{trap}")
                logger.debug("Not following %.200s: %s", url, trap)
                return False
        forget_proxy(request)  # never store a proxy's credentials
        # A retry's backoff (politeness/retries.py): the frontier keeps it that long.
        wait_ms = int(request.meta.pop(RETRY_WAIT, 0) or 0)
        seen = self.redis.seen
        recrawl_after = scope.get("recrawl_after") if scope else None
        if recrawl_after is not None and not seen.timed:
            # A seed is refused (one line, kept in start_urls:rejected); the
            # pages of one taken before RECRAWL_AFTER was unset just lose it.
            if seed_entry:
                why = "recrawl_after needs RECRAWL_AFTER set (the seen-set keeps no times)"
                self.redis.batcher.reject_seed(seed_entry, why)
                return False
            recrawl_after = None
        # The worker's pre-filter holds a fingerprint up to RECRAWL_AFTER (its
        # generations turn every half of it), so a shorter seed's own is not
        # held there at all.
        prefilter = recrawl_after is None or recrawl_after >= seen.recrawl_after
        raw = None
        if not request.dont_filter or request.meta.get("seed"):
            raw = self.df.fingerprint(request)
            if prefilter and not request.dont_filter and not seed_entry and raw in self.sent:
                # Already sent to the shared dupefilter by this worker.
                self.stats.inc_value("dupefilter/filtered")
                return False
        # Before encoding: a request auto mode sends to the browser is marked so.
        lane = self.render.lane_of(request)
        try:
            priority, payload = self.queue.encode(request)
        except InvalidEntry as exc:
            self.bad_entries.unserializable(request, exc)
            if seed_entry:
                self.redis.batcher.reject_seed(seed_entry, f"cannot be stored: {exc}")
            return False
        if raw is None:
            fingerprint = ""
        else:
            if prefilter:
                self.sent.add(raw)
            token = seen.token(raw, legacy=self._legacy_seen, recrawl_after=recrawl_after)
            fingerprint = ("!" if request.dont_filter else "") + token
        self.redis.batcher.enqueue(
            self.politeness.key_of(url), fingerprint, priority, payload, seed_entry, wait_ms, lane
        )
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

    # --- the seen-cache -------------------------------------------------------------------
    def _forget_sent(self, why: str) -> None:
        """Empty FRONTIER_SEEN_CACHE: Redis may have lost fingerprints it had acknowledged.

        A Redis that restarted (``appendfsync everysec`` loses up to a second
        of writes) or failed over to a replica that lagged may have lost
        links this worker sent. A link found in the cache is never sent
        again, so the cache must not outlive what Redis knows: it is cleared
        whenever the connection comes back and whenever Redis' run_id changes.
        """
        if len(self.sent):
            logger.info("Forgot %d fingerprints of the seen-cache (%s)", len(self.sent), why)
        self.sent.clear()
        self.stats.inc_value("frontier/seen_cache_cleared")

    async def _check_seen_mode(self) -> None:
        """Record the seen-set's mode, or refuse to start with another one.

        Workers of one spider in different DUPEFILTER_MODEs (or Bloom sizes)
        would each miss what the others recorded: every URL crawled again.
        """
        seen = self.redis.seen
        spec = seen.spec

        async def check(keys: RedisKeys, calls: RedisCalls) -> str | None:
            client = calls.client
            reply = await calls.call(
                "seen mode",
                lambda: client.set(
                    keys.seen_mode, seen.recorded(int(time.time() * 1000)), nx=True, get=True
                ),
            )
            return mode_mismatch(keys, spec, reply if isinstance(reply, bytes) else None)

        for problem in await self.redis.per_shard(check):
            if problem is not None:
                raise NotConfigured(problem)
        await self._check_legacy_seen()

    async def _check_legacy_seen(self) -> None:
        if self.keys.sharded:
            # A cluster's frontier is new: no set of the release before exists.
            self._legacy_seen = False
            return
        client = self.redis.client
        self._legacy_seen = bool(
            await self.redis.calls.call(
                "EXISTS dupefilter",
                lambda: client.exists(self.keys.dupefilter),
                retry=False,
                writes=False,
            )
        )

    async def _check_run_id(self) -> None:
        """Clear the seen-cache if Redis is not the server it was (restart, failover):
        any shard's master, on a sharded frontier."""

        async def run_id_of(keys: RedisKeys, calls: RedisCalls) -> str:
            client = calls.client
            info = await calls.call(
                "INFO server", lambda: client.info("server"), retry=False, writes=False
            )
            return str(info.get("run_id", ""))

        run_id = ",".join(await self.redis.per_shard(run_id_of))
        if self._run_id is not None and run_id != self._run_id:
            self._forget_sent(f"Redis run_id changed from {self._run_id} to {run_id}")
        self._run_id = run_id

    def _count_enqueued(self, sent: int, added: int) -> None:
        if added:
            self._want.set()  # new work may be ready for us
        if sent > added:
            self.stats.inc_value("dupefilter/filtered", sent - added)

    def _download_ended(self, request: Request, spider: Spider) -> None:
        """Give back the cap slot of a leased request whose download ended.

        The cluster-wide cap (``CONCURRENT_REQUESTS_PER_DOMAIN``) counts
        downloads, like Scrapy's per-domain slot: a page being parsed, or
        waiting for its items to be written, holds no slot. The lease itself
        stays until the page is processed (``_ack_finished``). Redirects and
        retries are new requests, leased again, so a lease has one download.
        """
        lease = self._active.get(request)
        if lease is None or lease[0] in self._released:
            return
        self._released.add(lease[0])
        self.redis.batcher.release(lease[0], now=lease[0] in self._at_cap)

    def _ack_finished(self) -> None:
        """Queue the ack of every leased request the engine is done with.

        Scrapy has no signal for "this request is fully processed" (response
        scraped, its items through the pipelines, its links scheduled, or the
        download failed for good, retries and redirects included). The
        engine's slot keeps exactly that set (``internals.requests_in_progress``,
        which raises rather than guess if Scrapy changed); a request we
        handed out that is no longer there is finished.
        """
        if not self._active:
            return
        inprogress = internals.requests_in_progress(self.crawler.engine)
        done = [request for request in self._active if request not in inprogress]
        for request in done:
            lease_id = self._active.pop(request)[0]
            self._released.discard(lease_id)
            self._at_cap.discard(lease_id)
            self.redis.batcher.ack(lease_id)
        if done:
            self._want.set()  # their slots are free for new leases

    def _wanted(self) -> int:
        """How many requests to lease now: a worker holds at most CONCURRENT_REQUESTS +
        FRONTIER_PREFETCH leases, so a killed worker costs at most that many re-fetches."""
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
                if wanted <= 0:
                    break
                keys, calls = shards[(turn + i) % len(shards)]
                try:
                    got, ready, wait_ms = await self._lease_from(keys, calls, wanted)
                except RedisUnavailable as exc:
                    backoff = max(backoff, exc.delay)
                    continue
                leased |= got > 0
                more |= ready
                if wait_ms >= 0:
                    waits.append(wait_ms)
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

    async def _lease_from(
        self, keys: RedisKeys, calls: RedisCalls, wanted: int
    ) -> tuple[int, bool, int]:
        """One lease call to one queue: (requests leased, whether more hosts
        are ready there, ms until its next host's turn or -1)."""
        prefix = keys.lane_prefix
        candidates = [(h, self.politeness.delay_ms(h)) for h in self._candidates.get(prefix, [])]
        first_id = self._next_lease_id
        # Never reused, even if this call's reply is lost (lua/lease.lua).
        self._next_lease_id += wanted
        lease_keys, args = lease_call(
            keys,
            wanted,
            self.lease_ms,
            candidates,
            next_hosts=max(8, 2 * self.config.concurrency),
            per_host=self.config.per_host,
            owner=self.redis.lease_owner_of(keys),
            first_id=first_id,
            now=self.redis.clock.arg(),
        )
        # Shielded: cancelled mid-call at shutdown, its leases still reach hand_back.
        call = calls.script(self.redis.scripts.lease, lease_keys, args, retry=False)
        self._leasing = asyncio.ensure_future(call)
        try:
            leased, next_hosts, wait_ms, full = await asyncio.shield(self._leasing)
        except RedisUnavailable:
            self._leasing = None
            raise
        # (Cancelled at shutdown, the call stays in _leasing for hand_back.)
        self._leasing = None
        self._candidates[prefix] = self.bad_entries.host_names(next_hosts, keys)
        added = 0
        for lease_id, member, host in zip(leased[::3], leased[1::3], leased[2::3], strict=True):
            request = self.bad_entries.decode(self.queue, lease_id, member)
            if request is None:
                continue
            self._prefetched.append((request, (lease_id, member, host.decode())))
            if host in full:
                self._at_cap.add(lease_id)
            added += 1
        if added:
            internals.wake_engine(self.crawler.engine)
        return len(leased) // 3, bool(self._candidates[prefix]), int(wait_ms)

    async def _lease_loop(self) -> None:
        """Renew our leases, put back expired leases, and notice a Redis that changed."""
        while True:
            await asyncio.sleep(self.config.renew_interval)
            ids = [lease[0] for _, lease in self._prefetched]
            ids += [lease[0] for lease in self._active.values()]
            try:
                await self.leases.renew(ids)
                moved = await self.leases.reclaim_expired()
                await self._check_run_id()
                if self._legacy_seen:
                    await self._check_legacy_seen()
            except RedisUnavailable:
                continue  # the call path logged it; try again next period
            if moved:
                self._want.set()
