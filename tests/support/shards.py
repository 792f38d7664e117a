"""Test hosts for a sharded frontier: one host name that each shard owns."""

from __future__ import annotations

from spiders_project.keys import RedisKeys


def one_host_per_shard(keys: RedisKeys, shards: int) -> list[str]:
    """``h<i>.example`` names, the first that each of ``shards`` shards owns, in
    shard order: a test then touches every master of a Redis Cluster."""
    by_shard: dict[int, str] = {}
    i = 0
    while len(by_shard) < shards:
        by_shard.setdefault(keys.shard_of(f"h{i}.example"), f"h{i}.example")
        i += 1
    return [by_shard[n] for n in range(shards)]
