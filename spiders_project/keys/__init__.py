"""Every Redis key the project reads or writes, built in one place.

All keys of a spider share the prefix ``<spider>:`` so one Redis can serve several spiders, and an
operator can find everything with one pattern. On a Redis Cluster (``REDIS_CLUSTER``) the prefix is
the hash tag ``{<spider>}:``: every key of a spider then lives in one slot, so each of its scripts
and transactions touches one slot, as the cluster requires, and different spiders spread over the
masters.
"""

from __future__ import annotations

import binascii
import zlib
from dataclasses import dataclass, replace
from functools import lru_cache

# Set of the spiders whose workers buffered items (``db_writer --all-spiders``).
SPIDERS = "spiders"

# The frontier's queues (``RedisKeys.lane``): "" holds the requests fetched over
# HTTP, "render" those that render in a browser, so pools of workers can take
# one or both (WORKER_ROLE). Each has its own hosts' queues, ready-set, leases
# and cap counts; the seen-set, the hosts' turns and delays are shared.
HTTP = ""
RENDER = "render"
LANES = (HTTP, RENDER)


@dataclass(frozen=True)
class RedisKeys:
    """Key names of one spider (``RedisKeys("distributed").requests``)."""

    spider: str
    # A spider's own seed list (its ``redis_key``, as in scrapy-redis); "" for the default.
    seeds: str = ""
    # Keys for a Redis Cluster: prefixed with the hash tag "{<spider>}:".
    cluster: bool = False
    # The frontier's shards (FRONTIER_SHARDS, Redis Cluster only) and which
    # of them these keys name; -1: the spider's own slot (see frontier_prefix).
    shards: int = 1
    shard: int = -1
    # Which of the frontier's queues these keys name (LANES).
    lane: str = HTTP

    @property
    def sharded(self) -> bool:
        """Whether the frontier is split over several slots (shards.py)."""
        return self.cluster and self.shards > 1

    def in_lane(self, lane: str) -> RedisKeys:
        """The keys of the same shard's ``lane`` queue (``HTTP`` or ``RENDER``)."""
        return self if lane == self.lane else replace(self, lane=lane)

    @property
    def all_lanes(self) -> list[RedisKeys]:
        """These keys in every lane: the HTTP queue, then the render queue."""
        return [self.in_lane(lane) for lane in LANES]

    @property
    def lane_prefix(self) -> str:
        """The frontier's prefix, then ``render:`` for the render queue (same slot:
        a script still touches one slot, and the seen-set it shares)."""
        return self.frontier_prefix + (f"{self.lane}:" if self.lane else "")

    def _lane_key(self, suffix: str) -> str:
        return self.lane_prefix + suffix

    def of_shard(self, index: int) -> RedisKeys:
        """The keys whose frontier keys are shard ``index``'s."""
        return self if index == self.shard else replace(self, shard=index)

    def shard_of(self, host: str) -> int:
        """The shard of ``host``'s queue: a stable hash, the same on every worker."""
        if not self.sharded:
            return 0
        return zlib.crc32(host.encode("utf-8", "surrogateescape")) % self.shards

    def for_host(self, host: str) -> RedisKeys:
        """The keys whose frontier keys are those of ``host``'s shard."""
        return self.of_shard(self.shard_of(host)) if self.sharded else self

    @property
    def all_shards(self) -> list[RedisKeys]:
        """The keys of every shard (just these keys when not sharded)."""
        if not self.sharded:
            return [self]
        return [self.of_shard(i) for i in range(self.shards)]

    @property
    def frontier_prefix(self) -> str:
        """What the frontier's keys start with: the spider's prefix, unless the frontier is
        sharded: then ``{<tag>}:`` of this shard (:func:`shard_tag`), so a host's queue, its
        ready-set entry, its leases and its fingerprints share one slot, as each script needs."""
        if not self.sharded or self.shard < 0:
            return self.prefix
        return f"{{{shard_tag(self.spider, self.shard, self.shards)}}}:"

    def _frontier_key(self, suffix: str) -> str:
        return self.frontier_prefix + suffix

    @property
    def frontier_shards(self) -> str:
        """The frontier's shard count, as the first worker recorded it (all split alike)."""
        return self._key("frontier:shards")

    @property
    def prefix(self) -> str:
        """What every key of the spider starts with: ``<spider>:``, or ``{<spider>}:``
        on a Redis Cluster."""
        return f"{{{self.spider}}}:" if self.cluster else f"{self.spider}:"

    def _key(self, suffix: str) -> str:
        return self.prefix + suffix

    @property
    def start_urls(self) -> str:
        """List of seeds, pushed by operators with LPUSH, read from the right.

        ``<spider>:start_urls`` unless the spider class names another in ``redis_key``; on a Redis
        Cluster ``{<spider>}:start_urls``, and a ``redis_key`` gets the tag too (``<spider>:...``
        becomes ``{<spider>}:...``, another name is prefixed with it): the seeds are in the
        spider's slot, where an unsharded frontier's enqueue script claims them as it queues them.
        """
        if not self.seeds:
            return self._key("start_urls")
        if not self.cluster or self.seeds.startswith(self.prefix):
            return self.seeds
        own = f"{self.spider}:"
        return self.prefix + (self.seeds[len(own) :] if self.seeds.startswith(own) else self.seeds)

    @property
    def start_urls_rejected(self) -> str:
        """Seeds that could not be parsed, kept raw for inspection."""
        return f"{self.start_urls}:rejected"

    @property
    def hosts(self) -> str:
        """Ready-set of the frontier: host -> time (ms) it may next be fetched."""
        return self._lane_key("requests:hosts")

    def host_queue(self, host: str) -> str:
        """One host's sorted set of JSON requests that need an order, lowest score first
        (priorities other than 0, seeds, never-filtered requests, put-back retries)."""
        return self._lane_key(f"requests:host:{host}")

    def host_list(self, host: str) -> str:
        """One host's first-in first-out list of new priority-0 requests, the
        usual followed link (about 3 bytes of Redis per entry besides its JSON,
        against about 90 in a sorted set; lua/lease.lua says the order)."""
        return self._lane_key(f"requests:list:{host}")

    def host_later(self, host: str) -> str:
        """One host's retries waiting for their time: sorted set of
        "<queue score> <JSON request>" by the time (ms) they may be fetched."""
        return self._lane_key(f"requests:later:{host}")

    @property
    def seen(self) -> str:
        """Counter of fingerprints in the seen-set; its buckets (exact mode) are
        ``<spider>:seen:<level>:<n>``, its Bloom blocks ``<spider>:seen:b:<n>``
        (frontier/lua/seen.lua)."""
        return self._frontier_key("seen")

    @property
    def seen_parts(self) -> str:
        """SCAN pattern of the seen-set's buckets, Bloom blocks and mode (``seen:*``),
        for the two places that forget it (scheduler flush, dupefilter ``clear``)."""
        special = str.maketrans({c: "\\" + c for c in "*?[]\\"})
        return self.seen.translate(special) + ":*"

    @property
    def seen_mode(self) -> str:
        """The seen-set's mode, as its first worker recorded it (frontier/seen.py)."""
        return self._frontier_key("seen:mode")

    @property
    def in_flight(self) -> str:
        """Hash host -> its requests leased by any worker and not yet downloaded
        (the cluster-wide cap)."""
        return self._lane_key("requests:in_flight")

    @property
    def released(self) -> str:
        """Set of lease ids whose download ended (their cap slot given back)
        but whose page is not yet processed (the lease stays)."""
        return self._lane_key("requests:released")

    @property
    def cap_waiters(self) -> str:
        """Hash host -> the workers (space-separated) that found it at its cap;
        the host is out of the ready-set until one of its slots is given back."""
        return self._lane_key("requests:cap_waiters")

    @property
    def cap_handover(self) -> str:
        """Hash host -> "<until ms> <worker>": a freed slot that worker gave back
        goes first to the workers that waited for it (lua/ack.lua)."""
        return self._lane_key("requests:cap_handover")

    @property
    def requests_size(self) -> str:
        """Counter of requests queued in all host queues, retries waiting included (not leased)."""
        return self._lane_key("requests:size")

    @property
    def requests_seq(self) -> str:
        """Counter giving first-in first-out order within one priority."""
        return self._frontier_key("requests:seq")

    @property
    def seeds_taken(self) -> str:
        """Sorted set of a shard: digest of a seed entry -> time (ms) its request went in;
        sharded frontier only, where a seed leaves start_urls once queued (``batcher.
        _flush_sharded``): read again within ``calls.SEED_TAKEN_MS``, not queued twice."""
        return self._frontier_key("seeds:taken")

    @property
    def host_delays(self) -> str:
        """Hash host -> delay (ms) the site asked for (robots.txt Crawl-delay)."""
        return self._frontier_key("requests:host_delays")

    @property
    def host_limits(self) -> str:
        """Hash host -> its operator's overrides the lease script reads, "<delay ms> <cap>"
        (-1 and 0: none), in the host's shard (``scrapy frontier host``)."""
        return self._frontier_key("requests:host_limits")

    @property
    def host_steering(self) -> str:
        """Hash host -> the operator's steering of it, JSON: delay, cap, blocked
        (``politeness/steering.py``); every worker reads it each second."""
        return self._key("hosts:steering")

    def host_turn(self, host: str) -> str:
        """Time (ms) the cluster last sent the host a request (dispatch gate); expires after."""
        return self._frontier_key(f"requests:turn:{host}")

    def robots(self, origin: str) -> str:
        """An origin's ("http://host[:port]") robots.txt, fetched once for the cluster; expires."""
        return self._key(f"robots:{origin}")

    def robots_lock(self, origin: str) -> str:
        """Held by the one worker fetching an origin's robots.txt."""
        return self._key(f"robots:{origin}:lock")

    @property
    def render_auto(self) -> str:
        """Hash "<section> js" / "<section> http" -> pages of a site section that
        needed JavaScript, or not (RENDER_MODE=auto: rendering/auto.py)."""
        return self._key("render:auto")

    @property
    def proxies_banned(self) -> str:
        """Sorted set of proxy name (scheme://host:port) -> time (ms) its cluster-wide ban ends."""
        return self._key("proxies:banned")

    @property
    def jobs(self) -> str:
        """Hash of the crawl jobs: job id -> its record, JSON (state, run, started_at, seeds)."""
        return self._key("jobs")

    @property
    def jobs_events(self) -> str:
        """Stream of the jobs' state changes (submitted, ...), bounded by JOBS_EVENTS_MAX."""
        return self._key("jobs:events")

    @property
    def job_schedules(self) -> str:
        """Hash job id -> its schedule, JSON: cron, what a run submits, and the last tick run."""
        return self._key("jobs:schedules")

    def seed_pages(self, seed_id: str) -> str:
        """Pages fetched so far from one seed with ``max_pages`` (its budget); expires."""
        return self._key(f"seed:{seed_id}:pages")

    @property
    def leases(self) -> str:
        """Lease ids ("<host:pid:run>/<n>") of requests popped and not done, by deadline (ms)."""
        return self._lane_key("requests:leases")

    @property
    def lease_info(self) -> str:
        """Hash lease id -> "<queue score> <#host> <host><request>", to put it back in place."""
        return self._lane_key("requests:lease_info")

    @property
    def requests_rejected(self) -> str:
        """Frontier entries that were not requests we wrote."""
        return self._frontier_key("requests:rejected")

    @property
    def requests_unserializable(self) -> str:
        """Requests a spider made that the frontier cannot store (meta JSON cannot hold)."""
        return self._key("requests:unserializable")

    @property
    def dupefilter(self) -> str:
        """The previous release's seen-set (40-hex fingerprints), read while it exists;
        ``scrapy dupefilter migrate`` moves it into :attr:`seen` and deletes it."""
        return self._frontier_key("dupefilter")

    @property
    def items(self) -> str:
        """The item buffer: a list of JSON items for the db_writer."""
        return self._key("items")

    @property
    def items_processing(self) -> str:
        """The previous release's one processing list (``keys/db_writers.py`` has today's)."""
        return self._key("items:processing")

    @property
    def items_rejected(self) -> str:
        """Buffered entries that were not valid JSON items."""
        return self._key("items:rejected")

    @property
    def dead(self) -> str:
        """Requests that failed for good, with their error and attempts."""
        return self._key("dead")

    @property
    def dead_rejected(self) -> str:
        """Dead-letter entries that were not ours, set aside by requeue."""
        return self._key("dead:rejected")

    @property
    def db_writer_lock(self) -> str:
        """The previous release's lock of its lone db_writer of the spider (a token with a TTL)."""
        return self._key("db_writer:lock")

    @property
    def db_writer_stats(self) -> str:
        """Hash of db_writer counters (items written, batches, rejects)."""
        return self._key("db_writer:stats")

    @property
    def workers(self) -> str:
        """Sorted set of worker ids ("host:pid") by time of their last stats publish (Unix s)."""
        return self._key("workers")

    def worker_stats(self, worker: str) -> str:
        """Hash of one worker's Scrapy stats and metric counters; expires after it stops."""
        return self._key(f"worker:{worker}")

    def worker_heartbeat(self, worker: str) -> str:
        """Exists while the worker lives: set again, with a TTL, at every publish."""
        return self._key(f"worker:{worker}:heartbeat")

    @property
    def stats_totals(self) -> str:
        """Hash of the spider's counters summed over every worker, past ones included."""
        return self._key("stats:totals")

    @property
    def stats_samples(self) -> str:
        """Sorted set of "<time> <pages total>" samples by time, for pages/s."""
        return self._key("stats:samples")


def seeds_key_of(spidercls: type) -> str | None:
    """The seed list a spider class names in ``redis_key`` (``%(name)s`` filled in), or None."""
    key = getattr(spidercls, "redis_key", None)
    if not key:
        return None
    return str(key) % {"name": getattr(spidercls, "name", "")}


# Slots of a Redis Cluster (CRC16 of the key's hash tag, modulo 16384).
SLOTS = 16384


def key_slot(key: str) -> int:
    """The cluster slot of ``key``, as Redis computes it (CRC16-XMODEM of its tag)."""
    data = key.encode()
    start = data.find(b"{")
    if start >= 0:
        end = data.find(b"}", start + 1)
        if end > start + 1:
            data = data[start + 1 : end]
    return binascii.crc_hqx(data, 0) % SLOTS


@lru_cache(maxsize=1024)
def shard_tag(spider: str, index: int, shards: int) -> str:
    """The hash tag of shard ``index`` of ``shards``: the first of ``<spider>/<index>``,
    ``<spider>/<index>.1``, ... whose slot is in the index-th of ``shards`` equal
    ranges of the slots.

    ``redis-cli --cluster create`` gives N masters N equal ranges, so N shards
    land on N different masters; plain ``<spider>/<index>`` tags would land
    where their hashes fall, two of three on one master one time in three.
    """
    low, high = SLOTS * index // shards, SLOTS * (index + 1) // shards
    attempt = 0
    while True:
        tag = f"{spider}/{index}" + (f".{attempt}" if attempt else "")
        if low <= key_slot(f"{{{tag}}}") < high:
            return tag
        attempt += 1
