"""The frontier's counts brought back to what they count, by a worker with nothing to do.

The idle rule (``read_model/contract.py``) reads each queue's ``requests:size``
and its leases, and the jobs' finish rule their queued, later, leased and
slots counts. Every script changes those counts in the same atomic step as
what they count, and a replica promoted in a failover applies each script
whole, so it loses the old master's last writes counts and structures
together. But a write lost on one side only (a key an operator deleted or
restored, a lease whose info was removed, a script that failed half-way, a
bug) would leave a count above its structure, and nothing else ever lowers
it: every worker would then wait for work that does not exist, and never
close when idle.

So a worker that holds nothing and has nothing to write runs
``lua/reconcile.lua`` on each shard at every lease period. The script
recomputes a count only where that takes bounded reads, from structures that
are empty (a lane without leases has no slot taken; one without ready or
waiting hosts has nothing queued), so a busy cluster pays a few reads of
each idle worker and changes nothing. A lease whose info is gone is ended
when it expires (``lua/expired.lua``), like any other lease its holder no
longer renews, and the slot it held comes back here.
"""

from __future__ import annotations

import logging

from scrapy.statscollectors import StatsCollector

from spiders_project.frontier.calls import reconcile_call
from spiders_project.frontier.context import WorkerRedis

logger = logging.getLogger("spiders_project.frontier.scheduler")


class Reconciler:
    """Runs ``lua/reconcile.lua`` on every shard of the frontier; says what it corrected."""

    def __init__(self, redis: WorkerRedis, stats: StatsCollector) -> None:
        self.redis = redis
        self.stats = stats

    async def reconcile(self) -> int:
        """Correct every count of every shard that disagrees with what it counts;
        how many were corrected. Raises RedisUnavailable."""
        corrected = 0
        for keys, calls in self.redis.shard_calls:
            script_keys, args = reconcile_call(keys, now=self.redis.clock.arg())
            fixed = await calls.script(self.redis.scripts.reconcile, script_keys, args, retry=False)
            if not fixed:
                continue
            logger.warning(
                "Frontier counts that disagreed with what they count (a write lost), corrected: %s",
                "; ".join(entry.decode("utf-8", "replace") for entry in fixed),
            )
            self.stats.inc_value("frontier/counts_reconciled", len(fixed))
            corrected += len(fixed)
        return corrected
