"""The frontier shard a page's own writes go to: the shard of its lease.

On a sharded frontier (a Redis Cluster, ``FRONTIER_SHARDS`` > 1) a page's ack
goes to the shard whose queue gave its lease, on that shard's master. What a
worker writes for the page itself, its items and its page-state entries, goes
to that shard's item buffer (``keys.items`` of the shard), in the same
MULTI/EXEC as the ack (``write_behind/slots.py``). Nothing the worker writes
per page then lands on the spider's own slot, which would otherwise carry
every page of the cluster on one master, whatever the number of masters.

The lease taker stamps each leased request with its lease's shard
(``meta.LEASE_SHARD``), so finding it costs a dict lookup. A request that
carries none on a sharded frontier was not leased (a spider that downloads
one itself): its page's entries go to the shard of its politeness group, where
its host's requests are queued. On one Redis, or for an item of no page (from
``start()``), the answer is ``NO_SHARD``: the spider's own buffer, as before.
"""

from __future__ import annotations

from collections.abc import Callable

from scrapy import Request
from scrapy.crawler import Crawler

from spiders_project.crawl.meta import LEASE_SHARD
from spiders_project.frontier.context import WorkerRedis
from spiders_project.frontier.lease_id import NO_SHARD
from spiders_project.frontier.steps import FrontierSteps
from spiders_project.keys import RedisKeys
from spiders_project.plumbing.wiring import shared


class PageShards:
    """Which item buffer a page's writes go to (see the module docstring)."""

    def __init__(self, keys: RedisKeys, group_of: Callable[[], Callable[[str], str]]) -> None:
        self.keys = keys
        self.sharded = keys.sharded
        # The politeness group of a URL (FrontierSteps.group_of), asked for
        # only when a request carries no lease: built on first use.
        self._group_of = group_of

    @classmethod
    def of(cls, crawler: Crawler) -> PageShards:
        """The crawler's page shards, built on first use."""

        def build() -> PageShards:
            return cls(WorkerRedis.of(crawler).keys, lambda: FrontierSteps.of(crawler).group_of)

        return shared(crawler, cls, build)

    def of_request(self, request: Request | None) -> int:
        """The shard whose item buffer takes the entries of ``request``'s page, or
        ``NO_SHARD`` (the spider's own buffer: one Redis, or no page)."""
        if not self.sharded or request is None:
            return NO_SHARD
        shard = request.meta.get(LEASE_SHARD)
        if isinstance(shard, int):
            return shard
        return self.keys.shard_of(self._group_of()(request.url))
