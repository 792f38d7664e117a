"""What happens to leases outside the fetch itself: renewal, reclaim and hand-back.

The scheduler decides which requests to lease and when one is finished (its
ack rides with the request's items and links in the write batcher). The rest
of a lease's life is here, apart, because it is where the lease-ownership
rules of ``lua/lease.lua`` are enforced: every call acts on lease ids, and
ids name one lease of one worker, so a worker that stalled past its lease
timeout and comes back can renew, reclaim or hand back only what is still
its own, never a lease another worker took since.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import Any

from scrapy import Request
from scrapy.statscollectors import StatsCollector

from spiders_project.frontier.calls import expired_call, requeue_call
from spiders_project.frontier.context import WorkerRedis
from spiders_project.frontier.lease_id import Lease
from spiders_project.keys import RedisKeys
from spiders_project.redis_access import RedisCalls, RedisUnavailable

logger = logging.getLogger(__name__)


class LeaseKeeper:
    """Renews this worker's leases, puts back any worker's expired ones, hands back its own."""

    def __init__(self, redis: WorkerRedis, lease_ms: int, stats: StatsCollector) -> None:
        self.redis = redis
        self.keys = redis.keys
        self.lease_ms = lease_ms
        self.stats = stats

    def _by_queue(self, leases: list[Lease]) -> list[tuple[RedisKeys, list[Lease]]]:
        """``leases`` grouped by the queue (shard and lane) that gave them, with its keys."""
        groups: dict[tuple[int, str], tuple[RedisKeys, list[Lease]]] = {}
        for lease in leases:
            group = groups.get((lease.shard, lease.lane))
            if group is None:
                group = groups[lease.shard, lease.lane] = (self.redis.keys_of_lease(lease), [])
            group[1].append(lease)
        return list(groups.values())

    async def renew(self, leases: list[Lease]) -> None:
        """Push the deadline of our ``leases`` forward; others' ids are left alone."""
        for keys, group in self._by_queue(leases):
            await self.redis.calls_for(keys).script(
                self.redis.scripts.renew,
                [keys.leases],
                [self.redis.clock.arg(), self.lease_ms, *(lease.id for lease in group)],
                retry=False,
            )

    async def reclaim_expired(self, limit: int = 1000) -> int:
        """Return expired leases to their queues, in every shard and lane (a pool
        of HTTP workers puts back a dead render worker's too); how many went back."""
        moved = 0
        for keys, calls in self.redis.queue_calls():
            moved += await self._reclaim_expired(keys, calls, limit)
        return moved

    async def _reclaim_expired(self, keys: RedisKeys, calls: RedisCalls, limit: int) -> int:
        """Return expired leases to their queues; several workers may race safely.

        ``lua/requeue.lua`` re-checks each deadline as it moves the lease, so
        a lease renewed after it was listed stays with its holder. A lease
        that cannot be put back (no lease info) is set aside by
        ``lua/expired.lua`` and logged here.
        """
        scripts = self.redis.scripts
        script_keys, args = expired_call(keys, limit, now=self.redis.clock.arg())
        found, rejected = await calls.script(scripts.expired, script_keys, args, retry=False)
        for lease_id in rejected:
            logger.warning(
                "Rejected lease %.200r: it has no lease info, so no request to put back "
                "(kept in %s)",
                lease_id,
                keys.requests_rejected,
            )
            self.stats.inc_value("frontier/rejected")
        if not found:
            return 0
        leases = [
            (i, h.decode("utf-8", "replace")) for i, h in zip(found[::2], found[1::2], strict=True)
        ]
        script_keys, args = requeue_call(keys, leases, expired=True, now=self.redis.clock.arg())
        moved = int(await calls.script(scripts.requeue, script_keys, args, retry=False))
        if moved:
            logger.warning("Put back %d expired leases of a stopped worker", moved)
            self.stats.inc_value("frontier/leases_reclaimed", moved)
        return moved

    async def of_call(self, call: asyncio.Future[Any] | None, timeout: float) -> list[Lease]:
        """The leases a lease call took whose caller was cancelled (shutdown) before it
        read the reply: without this they would wait out their timeout unreturned."""
        if call is None:
            return []
        try:
            leased = (await asyncio.wait_for(call, timeout))[0]
        except (RedisUnavailable, TimeoutError):
            return []  # whatever it leased expires and goes back
        triples = zip(leased[::3], leased[1::3], leased[2::3], strict=True)
        return [Lease.of(lease_id, member, host.decode()) for lease_id, member, host in triples]

    def give_back(self, unstarted: deque[tuple[Request, Lease]]) -> None:
        """Put the leases of requests this worker took and has not started back in
        their queues, in the background (``unstarted`` is emptied now, so they are
        no longer renewed): for a pause that may last (``plumbing/pauses.py``)."""
        leases = [lease for _, lease in unstarted]
        unstarted.clear()
        if not leases:
            return
        self.stats.inc_value("frontier/leases_given_back", len(leases))
        task = asyncio.ensure_future(self.hand_back(leases, self.lease_ms / 1000))
        task.add_done_callback(_log_failure)

    async def hand_back(self, leases: list[Lease], timeout: float) -> int:
        """Put our unfinished ``leases`` back in their queues now; how many went back.

        If Redis does not take them within ``timeout`` they stay leased, and
        expire and return like a dead worker's: nothing is lost either way.
        """
        deadline = asyncio.get_running_loop().time() + timeout
        # Each lease named once, in the order given.
        unique = list({lease.id: lease for lease in leases}.values())
        returned = 0
        for keys, group in self._by_queue(unique):
            ids = [(lease.id, lease.host) for lease in group]
            script_keys, args = requeue_call(keys, ids, expired=False, now=self.redis.clock.arg())
            try:
                result = await self.redis.calls_for(keys).script(
                    self.redis.scripts.requeue, script_keys, args, deadline=deadline
                )
            except RedisUnavailable:
                logger.error("Could not hand back %d leases; they expire and return", len(group))
                continue
            returned += int(result)
        return returned


def _log_failure(task: asyncio.Task[int]) -> None:
    """A background hand-back that failed: its leases expire and return; say so."""
    if not task.cancelled() and task.exception() is not None:
        logger.error("Handing back leases failed: %r; they expire and return", task.exception())
