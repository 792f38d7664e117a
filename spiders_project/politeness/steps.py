"""Politeness's frontier steps: a retry's wait, the group a request queues under,
and the hosts an operator blocked."""

from __future__ import annotations

from scrapy import Request
from scrapy.crawler import Crawler
from scrapy.statscollectors import StatsCollector

from spiders_project.crawl.meta import RETRY_WAIT
from spiders_project.frontier.context import WorkerRedis
from spiders_project.frontier.steps import Enqueue
from spiders_project.frontier.write_behind.batcher import RedisBatcher
from spiders_project.politeness.delays import HostPoliteness
from spiders_project.politeness.steered import SteeredHosts


class RetryWaitStep:
    """A retry's backoff (``retries.py``) becomes the enqueue's wait.

    The frontier keeps the request in its host's later-set for that many
    milliseconds (``frontier/lua/enqueue.lua``): no worker fetches it earlier
    and it holds no download slot meanwhile. The meta key is popped, so it is
    never stored with the request.
    """

    def admit(self, request: Request, entry: Enqueue) -> Request:
        entry.wait_ms = int(request.meta.pop(RETRY_WAIT, 0) or 0)
        return request


class PolitenessKeyStep:
    """Names the politeness group of each URL (``POLITENESS_KEY``) and its delay.

    The frontier keeps one queue per group and spaces each group's turns by
    its delay in the lease script, so N workers together respect it: the
    group is the queue a request is stored in, and the delay travels with
    every lease call (``delays.py``).
    """

    def __init__(self, politeness: HostPoliteness) -> None:
        # Bound methods taken once: the scheduler calls them per request and
        # per lease candidate.
        self.group_of = politeness.key_of
        self.delay_ms = politeness.delay_ms

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> PolitenessKeyStep:
        return cls(HostPoliteness.of(crawler))


# Stats of BlockedHostStep: links of a blocked host not queued, and requests
# of one dropped after their lease (queued before the block reached the worker).
BLOCKED_REFUSED = "frontier/host_blocked/refused"
BLOCKED_DROPPED = "frontier/host_blocked/dropped"


class BlockedHostStep:
    """Requests of a host blocked at runtime (``scrapy frontier host --block``)
    are neither queued nor fetched.

    The block's purge empties the host's queue at once, but a worker that has
    not read the block yet (``steered.py``: up to HOST_STEERING_INTERVAL) may
    still queue or lease one: ``leased`` catches those, so none is fetched. Each
    is counted, not dead-lettered: nothing failed, the operator said no. A seed
    of a blocked host goes to start_urls:rejected with its reason (left in
    start_urls, it would be read and refused again and again), from where it
    can be pushed again once the host is unblocked.
    """

    def __init__(
        self,
        steered: SteeredHosts,
        politeness: HostPoliteness,
        stats: StatsCollector,
        batcher: RedisBatcher | None = None,
    ) -> None:
        self.steered = steered
        self.group_of = politeness.key_of
        self.stats = stats
        self.batcher = batcher

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> BlockedHostStep:
        assert crawler.stats is not None
        batcher = WorkerRedis.of(crawler).batcher
        return cls(SteeredHosts.of(crawler), HostPoliteness.of(crawler), crawler.stats, batcher)

    def _blocked(self, request: Request) -> bool:
        return bool(self.steered.blocked) and self.group_of(request.url) in self.steered.blocked

    def admit(self, request: Request, entry: Enqueue) -> Request | None:
        if self._blocked(request):
            self.stats.inc_value(BLOCKED_REFUSED)
            if entry.seed_entry and self.batcher is not None:
                why = f"host {self.group_of(request.url)} is blocked (scrapy frontier host)"
                self.batcher.reject_seed(entry.seed_entry, why)
            return None
        return request

    def leased(self, request: Request) -> Request | None:
        if self._blocked(request):
            self.stats.inc_value(BLOCKED_DROPPED)
            return None
        return request
