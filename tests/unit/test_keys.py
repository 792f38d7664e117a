"""Keys of a single Redis, of a Redis Cluster and of a sharded frontier (keys.py)."""

from __future__ import annotations

import pytest
from redis.crc import key_slot as redis_key_slot

from spiders_project.keys import SLOTS, RedisKeys, key_slot, shard_tag
from spiders_project.keys.db_writers import item_buffers, lease, processing_of, writers

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


def test_what_db_writers_keep_beside_a_buffer_shares_its_slot() -> None:
    """Each script of the db_writer touches one buffer's keys and its writers': one slot."""
    assert processing_of(RedisKeys("s"), "w1") == "s:items:processing:w1"
    assert writers(RedisKeys("s")) == "s:db_writer:writers"
    assert lease(RedisKeys("s"), "w1") == "s:db_writer:lease:w1"
    for keys in (RedisKeys("distributed", cluster=True), SHARDED):
        [buffer] = item_buffers(keys)
        names = [buffer.items, processing_of(buffer, "w1"), writers(buffer), lease(buffer, "w1")]
        names += [buffer.items_rejected, buffer.db_writer_stats, buffer.items_processing]
        assert {key_slot(name) for name in names} == {key_slot(keys.items)}
