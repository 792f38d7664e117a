"""How many shards the frontier is split into, and the keys of a spider with them.

On a Redis Cluster one slot lives on one master, so a frontier in one slot
is bounded by one master's memory and CPU. ``FRONTIER_SHARDS`` splits it:
each host belongs to one shard (a stable hash of its name), and each shard's
keys carry a hash tag of their own (``keys.shard_tag``): a host's queue, its
ready-set entry, its leases, its cap slots and the fingerprints of its URLs
share one slot, so every frontier script still touches one slot, and
different hosts spread over the masters. The seen-set is split with the
hosts: a URL has one host, so its fingerprint is looked up in one shard
only, exactly, in the same script that queues it.

Every worker of a spider must split the frontier the same way, or requests
would land in shards nobody leases from: the first worker records the count
in ``{<spider>}:frontier:shards``, and a worker told another count refuses to
start. ``auto`` (the default) is the number of masters when that record is
first made; on a single Redis it is 1, and nothing changes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import redis
from redis.cluster import RedisCluster
from scrapy.settings import BaseSettings

from spiders_project.config import ConfigError, SettingsReader
from spiders_project.keys import RedisKeys
from spiders_project.redis_access import SyncRedisCalls
from spiders_project.redis_access.connection import RedisConfig, sync_client

AUTO = "auto"


def wanted_shards(settings: BaseSettings) -> int | None:
    """``FRONTIER_SHARDS`` as a count, or None for ``auto``."""
    read = SettingsReader(settings)
    raw = str(settings.get("FRONTIER_SHARDS", AUTO)).strip().lower()
    if raw == AUTO:
        return None
    count = read.getint("FRONTIER_SHARDS", minimum=1)
    read.check(
        count == 1 or RedisConfig.from_settings(settings).cluster,
        "FRONTIER_SHARDS",
        "a single Redis holds the frontier in one piece: more than 1 needs REDIS_CLUSTER=true",
    )
    return count


def spider_keys(settings: BaseSettings, spider: str, seeds: str = "") -> RedisKeys:
    """The keys of ``spider`` in the Redis the settings name.

    On a Redis Cluster this asks the cluster for the recorded shard count (and
    records it, when none is): one blocking call, made at start.
    """
    wanted = wanted_shards(settings)
    if not RedisConfig.from_settings(settings).cluster:
        return RedisKeys(spider, seeds)
    keys = RedisKeys(spider, seeds, cluster=True)
    client = sync_client(settings)
    try:
        shards = recorded_shards(client, keys, wanted)
    finally:
        client.close()
    return RedisKeys(spider, seeds, cluster=True, shards=shards)


def recorded_shards(client: redis.Redis, keys: RedisKeys, wanted: int | None) -> int:
    """The spider's shard count: the recorded one, else ``wanted`` (or the
    number of masters) recorded now. Raises ConfigError when ``wanted``
    differs from the record."""
    recorded = client.get(keys.frontier_shards)
    if recorded is None:
        count = wanted or masters(client)
        client.set(keys.frontier_shards, count, nx=True)
        recorded = client.get(keys.frontier_shards)
    shards = int(recorded or 1)
    if wanted is not None and wanted != shards:
        raise ConfigError(
            f"FRONTIER_SHARDS={wanted}: this spider's frontier is split into {shards} shards "
            f"({keys.frontier_shards}); every worker must use the same count"
        )
    return shards


def masters(client: redis.Redis) -> int:
    """How many masters serve slots now (CLUSTER SLOTS)."""
    reply = client.execute_command("CLUSTER SLOTS")
    if isinstance(reply, dict):  # redis-py's cluster client parses it
        return len({tuple(v["primary"]) for v in reply.values()}) or 1
    return len({(m[0], m[1]) for _, _, m, *_ in reply}) or 1


def shard_keys_reader(settings: BaseSettings, calls: SyncRedisCalls) -> Callable[[str], RedisKeys]:
    """A spider's keys for readers that must not record a shard count
    (monitor, crawlstatus): on a Redis Cluster, with the recorded count, 1 while
    none is (asked at every call: a crawl may start after the reader)."""
    if not RedisConfig.from_settings(settings).cluster:
        return RedisKeys

    def keys_of(spider: str) -> RedisKeys:
        keys = RedisKeys(spider, cluster=True)
        recorded = calls.command("GET", keys.frontier_shards, retry=False, writes=False)
        return RedisKeys(spider, cluster=True, shards=int(recorded or 1))

    return keys_of


def masters_memory_reader(
    settings: BaseSettings, calls: SyncRedisCalls
) -> Callable[[], list[dict[str, Any]]] | None:
    """Every master's INFO memory, for readers (monitor, crawlstatus) on a Redis
    Cluster, where one INFO answers for one node only; None on a single Redis."""
    if not RedisConfig.from_settings(settings).cluster:
        return None
    client = cast(RedisCluster, calls.client)

    def read() -> list[dict[str, Any]]:
        replies = calls.call(
            "INFO memory",
            lambda: client.info("memory", target_nodes=RedisCluster.PRIMARIES),
            retry=False,
            writes=False,
        )
        return list(replies.values())

    return read
