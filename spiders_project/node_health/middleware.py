"""The downloader middleware that watches this node's fetches and takes it out when cut off.

States, each change logged in one line:

- ``ok``: fetching. Failed fetches (RETRY_EXCEPTIONS) in a row are counted;
  any answer resets the count. They are ordinary failed attempts.
- ``judging``: NODE_FAILURES failed in a row (or NODE_FAILURE_WINDOW went by
  with only failures), or a request's last attempt failed after another
  failure: fetching is paused while the other workers fetch what this one
  failed, and their published counters say whether they reach it
  (``verdict.py``). An answer that arrives meanwhile ends it.
- ``cut off``: only this node failed. Its leased, unstarted requests go
  back to their queues (``plumbing/pauses.py``), it fetches nothing, and every
  NODE_PROBE_INTERVAL it tries a TCP connection to the last site that failed;
  when one succeeds it fetches again.

While judging or cut off, a request whose fetch fails is queued again as it
was, without using one of its retries: its failure says nothing about the
URL, and counted it would end as a dead letter that a healthy node would
have fetched.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from typing import Any
from urllib.parse import urlsplit

from scrapy import Request, signals
from scrapy.core.downloader.handlers.http11 import TunnelError
from scrapy.crawler import Crawler
from scrapy.exceptions import (
    CannotResolveHostError,
    DownloadConnectionRefusedError,
    DownloadTimeoutError,
    NotConfigured,
)
from scrapy.http import Response
from scrapy.statscollectors import StatsCollector
from twisted.internet.error import ConnectError, TCPTimedOutError

from spiders_project.frontier.context import WorkerRedis
from spiders_project.node_health.config import NodeHealthConfig
from spiders_project.node_health.verdict import (
    ANSWERS,
    FAILURES,
    Streak,
    Verdict,
    counts_of,
    judge,
)
from spiders_project.plumbing.pauses import EnginePauses
from spiders_project.plumbing.tasks import spawn_loop, stop_tasks, wait_event
from spiders_project.read_model.contract import CUT_OFF
from spiders_project.read_model.replies import text
from spiders_project.redis_access import RedisUnavailable

logger = logging.getLogger(__name__)

# What a broken network makes a fetch fail with: no connection, no name, no
# answer in time (Scrapy's and Twisted's own). A page that renders too long,
# or whose body is cut, says nothing about the node's network.
NETWORK_FAILURES: tuple[type[BaseException], ...] = (
    CannotResolveHostError,
    DownloadConnectionRefusedError,
    DownloadTimeoutError,
    ConnectError,
    TCPTimedOutError,
    TunnelError,
)

OK, JUDGING, OUT = "ok", "judging", "cut off"
HOLDER = "node health"
# Seconds between two looks at the cluster's samples while judging.
JUDGE_POLL = 1.0


class NodeHealthMiddleware:
    """Downloader middleware at 595: a response reaches it before HttpCompressionMiddleware (590)
    can refuse the body, an exception before RetryMiddleware (550); see the module docstring."""

    def __init__(
        self,
        crawler: Crawler,
        redis: WorkerRedis,
        config: NodeHealthConfig,
        failures: tuple[type[BaseException], ...],
    ) -> None:
        self.crawler = crawler
        self.redis = redis
        self.config = config
        self.failures = failures
        self.pauses = EnginePauses.of(crawler)
        assert crawler.stats is not None
        self.stats: StatsCollector = crawler.stats
        self.streak = Streak(config.failures, config.window)
        self.state = OK
        self._judging_since = 0.0
        # Other workers that published lately (refreshed every STATS_PUBLISH_INTERVAL):
        # with none, a streak cannot be judged and node health stays out of the way.
        self._others_alive = 0
        # The other workers' counters when judging began (verdict.judge).
        self._before: dict[str, tuple[int, int]] | None = None
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        # When each request in the downloader was sent (Redis time): a streak
        # counts from its first failed fetch's send (verdict.Streak.since).
        # Weak: a request that leaves by another way takes its entry with it.
        self._sent: weakref.WeakKeyDictionary[Request, float] = weakref.WeakKeyDictionary()
        crawler.signals.connect(self._opened, signal=signals.spider_opened)
        crawler.signals.connect(self._closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> NodeHealthMiddleware:
        config = NodeHealthConfig.from_settings(crawler.settings)
        if not config.enabled:
            raise NotConfigured("NODE_HEALTH_ENABLED is off")
        return cls(crawler, WorkerRedis.of(crawler), config, NETWORK_FAILURES)

    def _opened(self) -> None:
        self.stats.set_value(CUT_OFF, 0)
        self._task = spawn_loop("node health", self._watch())

    async def _closed(self) -> None:
        if self._task is not None:
            await stop_tasks([self._task])

    # --- what each fetch says --------------------------------------------------------
    def process_request(self, request: Request) -> None:
        if self.state == OK and self._others_alive:
            self._sent[request] = self.redis.time.now()

    def process_response(self, request: Request, response: Response) -> Response:
        self._sent.pop(request, None)
        if self.state == OK:
            self.streak.reached(self.redis.time.now())
        else:
            logger.warning("A fetch got an answer: this node reaches the sites, fetching again")
            if self.state == OUT:
                self.stats.inc_value("node/recoveries")
            self._to_ok()
        return response

    def process_exception(self, request: Request, exception: Exception) -> Request | None:
        if not isinstance(exception, self.failures):
            return None
        if self.state == OK:
            if not self._others_alive:
                return None  # nobody to compare with: an ordinary failed attempt
            now = self.redis.time.now()
            self.streak.failed(now, _target(request.url), self._sent.pop(request, None))
            # A request's last attempt failing on a node whose previous fetch
            # failed too is judged before it becomes a dead letter.
            if not (self.streak.due(now) or (self.streak.count > 1 and self._last(request))):
                return None  # an ordinary failed attempt
            self._start_judging(now)
        # Not the URL's fault: queued again as it was, no retry used.
        self.stats.inc_value("node/requeued")
        return request.replace(dont_filter=True)

    def _last(self, request: Request) -> bool:
        """Whether RetryMiddleware gives ``request`` up if this attempt fails."""
        if request.meta.get("dont_retry"):
            return True
        allowed = request.meta.get("max_retry_times", self.config.retry_times)
        return bool(request.meta.get("retry_times", 0) >= allowed)

    # --- states ------------------------------------------------------------------------
    def _start_judging(self, now: float) -> None:
        self.state = JUDGING
        self._judging_since = now
        self._before = None
        self.stats.inc_value("node/verdicts")
        self.pauses.hold(HOLDER)
        logger.warning(
            "%d fetches failed in a row over %.0f s: pausing while the cluster's progress "
            "says whether this node or the sites fail",
            self.streak.count,
            now - (self.streak.since or now),
        )
        self._wake.set()

    def _to_ok(self) -> None:
        self.state = OK
        self.streak.reached()
        self.stats.set_value(CUT_OFF, 0)
        self.pauses.release(HOLDER)

    def _cut_off(self) -> None:
        self.state = OUT
        self.stats.set_value(CUT_OFF, 1)
        self.stats.inc_value("node/cut_offs")
        self.stats.set_value("node/failed_before_cut_off", self.streak.count)
        self.pauses.hold(HOLDER, give_back=True)
        logger.error(
            "This node cannot reach the sites the cluster reaches (%d fetches failed in a "
            "row; other workers fetched pages meanwhile): handed back its leases, fetching "
            "nothing until %s answers (probing every %.0f s)",
            self.streak.count,
            " or ".join(f"{h}:{p}" for h, p in self.streak.latest_targets()),
            self.config.probe_interval,
        )

    def _sites_down(self, why: str) -> None:
        logger.info("Fetches fail for the whole cluster (%s): not this node, fetching again", why)
        self.state = OK
        self.streak.restart(self.redis.time.now())
        self.pauses.release(HOLDER)

    # --- the background loop: verdicts and probes -----------------------------------------
    async def _watch(self) -> None:
        await self._count_others()
        while True:
            if not await wait_event(self._wake, self.config.settle):
                await self._count_others()
                continue
            self._wake.clear()
            while self.state == JUDGING:
                await self._judge()
                if self.state == JUDGING:
                    await asyncio.sleep(JUDGE_POLL)
            while self.state == OUT:
                await asyncio.sleep(self.config.probe_interval)
                if self.state != OUT:
                    break  # an answer to a fetch already brought it back
                reached = await self._probe()
                if reached is not None and self.state == OUT:
                    logger.warning("This node reaches %s:%d again: fetching again", *reached)
                    self.stats.inc_value("node/recoveries")
                    self._to_ok()

    async def _judge(self) -> None:
        counts, hosts = await self._others()
        if counts is None or self._before is None:
            self._before = self._before or counts  # None while Redis is away: look again
            if self.redis.time.now() - self._judging_since > self.config.undecided_limit:
                self._sites_down("the other workers' stats could not be read: cannot tell")
            return
        # Failures on two sites or more, or a crawl of one site: comparable with
        # what the others fetch (verdict.judge).
        one_site = len(self.streak.targets) <= 1
        comparable = not one_site or hosts <= 1
        verdict = judge(self._before, counts, comparable=comparable, one_site=one_site)
        if verdict is Verdict.NODE:
            self._cut_off()
        elif verdict is Verdict.SITES:
            self._sites_down("the other workers fail too, or reach only other sites")
        elif self.redis.time.now() - self._judging_since > self.config.undecided_limit:
            self._sites_down("no other worker fetched anything meanwhile: cannot tell")

    async def _count_others(self) -> None:
        """Other workers that published in the last few STATS_PUBLISH_INTERVALs."""
        since = self.redis.time.now() - 3 * self.config.settle
        try:
            recent = await self.redis.calls.command(
                "ZRANGEBYSCORE", self.redis.keys.workers, since, "+inf", retry=False, writes=False
            )
        except RedisUnavailable:
            return
        self._others_alive = sum(1 for w in recent if text(w) != self.redis.worker)

    async def _others(self) -> tuple[dict[str, tuple[int, int]] | None, int]:
        """The other workers' published (answers, failed fetches), and how many hosts
        the frontier has work of (2 meaning two or more): ready, or downloading.

        Every queue counts, each shard's and lane's: the ready-set of one (all
        that was read once) left a sharded frontier at "no host", and a worker
        whose only failures were a dead site's was taken out of the crawl. Hosts
        being downloaded count too: at a crawl's end the ready-set may hold
        only a dead site while the others still fetch pages of other hosts.
        """
        keys = self.redis.keys
        queues = [lane for shard in keys.all_shards for lane in shard.all_lanes]
        reads: list[tuple[Any, ...]] = [("ZRANGE", keys.workers, 0, -1)]
        for queue in queues:
            reads += [("ZRANGE", queue.hosts, 0, 1), ("HKEYS", queue.in_flight)]
        try:
            workers, *seen = await self.redis.pipelined("node health", reads, retry=False)
            names = [text(w) for w in workers if text(w) != self.redis.worker]
            replies = await self.redis.pipelined(
                "node health stats",
                [("HMGET", keys.worker_stats(name), ANSWERS, FAILURES) for name in names],
                retry=False,
            )
        except RedisUnavailable:
            return None, 0
        counts = {
            name: counts_of({ANSWERS: text(a or b"0"), FAILURES: text(f or b"0")})
            for name, (a, f) in zip(names, replies, strict=True)
        }
        hosts = {text(host) for reply in seen for host in reply or ()}
        return counts, min(len(hosts), 2)

    async def _probe(self) -> tuple[str, int] | None:
        """The first of the last sites that failed to which a TCP connection opens now."""
        for host, port in self.streak.latest_targets():
            try:
                _, writer = await asyncio.wait_for(
                    asyncio.open_connection(host, port), min(10.0, self.config.probe_interval)
                )
            except (OSError, TimeoutError):
                continue
            writer.close()
            return host, port
        self.stats.inc_value("node/probes_failed")
        return None


def _target(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return parts.hostname or "", port
