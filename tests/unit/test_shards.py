"""Keys of a Redis Cluster and of a sharded frontier (keys.py, shards.py)."""

from __future__ import annotations

import pytest
from redis.crc import key_slot as redis_key_slot
from redis.exceptions import ClusterDownError, MovedError, RedisClusterException, TryAgainError

from spiders_project.contract import work_of, work_reads
from spiders_project.keys import LANES, RENDER, SLOTS, RedisKeys, key_slot, shard_tag
from spiders_project.redis_calls import ErrorKind, classify
from spiders_project.runtime.calls import ack_call, enqueue_call, lease_call, requeue_call

SHARDED = RedisKeys("distributed", cluster=True, shards=3)


@pytest.mark.parametrize(
    "key",
    ["distributed:start_urls", "{distributed}:items", "{a}{b}", "x{}y", "{distributed/2.7}:q"],
)
def test_key_slot_is_redis_own(key: str) -> None:
    assert key_slot(key) == redis_key_slot(key.encode())


def test_a_single_redis_keeps_its_key_names() -> None:
    keys = RedisKeys("distributed")
    assert keys.start_urls == "distributed:start_urls"
    assert keys.host_queue("a.example") == "distributed:requests:host:a.example"
    assert not keys.sharded and keys.all_shards == [keys] and keys.for_host("x") is keys


def test_cluster_keys_carry_the_spider_tag() -> None:
    keys = RedisKeys("distributed", cluster=True)
    assert keys.start_urls == "{distributed}:start_urls"
    assert keys.items == "{distributed}:items"
    assert keys.hosts == "{distributed}:requests:hosts"  # one shard: the spider's slot
    assert RedisKeys("s", "s:seeds", cluster=True).start_urls == "{s}:seeds"
    assert RedisKeys("s", "my_seeds", cluster=True).start_urls == "{s}:my_seeds"


@pytest.mark.parametrize("shards", [2, 3, 10, 30])
def test_shard_tags_fall_in_equal_parts_of_the_slots(shards: int) -> None:
    for index in range(shards):
        slot = key_slot("{" + shard_tag("distributed", index, shards) + "}")
        assert SLOTS * index // shards <= slot < SLOTS * (index + 1) // shards


def test_a_hosts_keys_share_one_slot_and_hosts_spread() -> None:
    seen_shards = set()
    for n in range(60):
        host = f"site{n}.example"
        keys = SHARDED.for_host(host)
        assert keys.shard == SHARDED.shard_of(host) == SHARDED.shard_of(host)  # stable
        seen_shards.add(keys.shard)
        slots = {
            key_slot(k)
            for k in (
                keys.host_queue(host),
                keys.host_list(host),
                keys.host_later(host),
                keys.hosts,
                keys.leases,
                keys.lease_info,
                keys.seen,
                keys.seen_mode,
                keys.host_turn(host),
                keys.host_delays,
                keys.requests_rejected,
            )
        }
        assert len(slots) == 1
    assert seen_shards == {0, 1, 2}
    # The spider's own keys stay in its slot, apart from every shard's.
    assert key_slot(SHARDED.items) == key_slot(SHARDED.start_urls) == key_slot(SHARDED.dead)
    assert len({key_slot(k.hosts) for k in SHARDED.all_shards} | {key_slot(SHARDED.items)}) == 4


@pytest.mark.parametrize("lane", LANES)
def test_every_frontier_script_of_a_shard_touches_one_slot(lane: str) -> None:
    shard = SHARDED.of_shard(1).in_lane(lane)
    calls = [
        enqueue_call(shard, [("h", "fp", 0, b"{}", b"", 0)]),
        lease_call(shard, 4, 1000, [("h", 0)], 8, 2, "w@1", 0),
        requeue_call(shard, [(b"w@1/0", "h")], expired=False),
        ack_call(shard, [b"w@1/0"]),
    ]
    for keys, _ in calls:
        assert len({key_slot(k) for k in keys}) == 1, keys
    # The render queue is in its shard's slot, with the seen-set it shares.
    assert key_slot(shard.hosts) == key_slot(SHARDED.of_shard(1).seen)


def test_work_sums_the_shards_and_lanes() -> None:
    reads = work_reads(SHARDED)
    # The first shard's HTTP queue, the two other shards', then three render queues.
    assert len(reads) == 5 + 2 * 2 + 3 * 2
    assert reads[9:] == [
        cmd
        for shard in SHARDED.all_shards
        for cmd in (
            ("GET", shard.in_lane(RENDER).requests_size),
            ("ZCARD", shard.in_lane(RENDER).leases),
        )
    ]
    replies = [1, b"2", 3, 4, 5, b"10", 20, None, 30, b"1", 1, None, 0, b"4", 2]
    assert work_of(replies) == work_of([1, 17, 56, 4, 5])


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        (ClusterDownError("CLUSTERDOWN The cluster is down"), ErrorKind.REFUSED_WRITES),
        (TryAgainError("TRYAGAIN"), ErrorKind.REFUSED_WRITES),
        (MovedError("3999 127.0.0.1:6381"), ErrorKind.CONNECTION),
        (RedisClusterException("Redis Cluster cannot be connected"), ErrorKind.CONNECTION),
    ],
)
def test_cluster_errors_pass(exc: Exception, kind: ErrorKind) -> None:
    assert classify(exc) is kind
