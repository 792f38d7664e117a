"""The worker's checks on the shared seen-set: its mode, its age, and the seen-cache.

Apart from the scheduler because each guards one way a worker could silently
crawl too much or too little: workers in different seen-set modes, a
seen-cache that outlived what Redis knows, and the previous release's set
of hex fingerprints that enqueue.lua must still look in.
"""

from __future__ import annotations

import logging
import time

from scrapy.exceptions import NotConfigured
from scrapy.statscollectors import StatsCollector

from spiders_project.frontier.context import WorkerRedis
from spiders_project.frontier.dupefilter import SentFingerprints
from spiders_project.frontier.seen import mode_mismatch
from spiders_project.keys import RedisKeys
from spiders_project.redis_access import RedisCalls

logger = logging.getLogger("spiders_project.frontier.scheduler")


class SeenGuard:
    """Keeps FRONTIER_SEEN_CACHE (``sent``) honest and the seen-set's mode shared."""

    def __init__(self, redis: WorkerRedis, sent: SentFingerprints, stats: StatsCollector) -> None:
        self.redis = redis
        self.sent = sent
        self.stats = stats
        self._run_id: str | None = None
        # Whether the previous release's set of hex fingerprints still exists
        # (until `scrapy dupefilter migrate` empties it): links then carry
        # their hex too, for enqueue.lua to look there.
        self.legacy_seen = True
        redis.state.on_reconnect.append(lambda: self.forget_sent("reconnected"))

    def forget_sent(self, why: str) -> None:
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

    async def check_mode(self) -> None:
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
        await self.check_legacy()

    async def check_legacy(self) -> None:
        """Look whether the previous release's set of hex fingerprints still exists."""
        keys = self.redis.keys
        if keys.sharded:
            # A cluster's frontier is new: no set of the release before exists.
            self.legacy_seen = False
            return
        client = self.redis.client
        self.legacy_seen = bool(
            await self.redis.calls.call(
                "EXISTS dupefilter",
                lambda: client.exists(keys.dupefilter),
                retry=False,
                writes=False,
            )
        )

    async def check_run_id(self) -> None:
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
            self.forget_sent(f"Redis run_id changed from {self._run_id} to {run_id}")
        self._run_id = run_id
