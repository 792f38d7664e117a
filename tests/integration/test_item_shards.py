"""The write batcher on a real Redis Cluster of 3 masters with a sharded frontier:
a page's items go into its shard's item buffer in the MULTI/EXEC of its ack,
items of no page into the spider's own buffer, and the backlog backpressure
reads is the sum of every buffer's length (frontier/write_behind/)."""

from __future__ import annotations

import asyncio
import logging
import threading

import pytest
import redis

from spiders_project.config import load_settings
from spiders_project.frontier.context import WorkerRedis
from spiders_project.frontier.lease_id import Lease
from spiders_project.frontier.outcomes import Outcome
from spiders_project.keys import RedisKeys
from spiders_project.redis_access import RedisState
from spiders_project.redis_access.connection import async_client
from spiders_project.redis_access.shards import spider_keys
from tests.support.processes import wait_until
from tests.support.services import RedisClusterGroup


@pytest.fixture(scope="module")
def cluster():
    group = RedisClusterGroup(masters=3)
    yield group
    group.stop()


class Monitor:
    """Every command one node runs (MONITOR), in order, as (name, first key)."""

    def __init__(self, port: int) -> None:
        self.seen: list[tuple[str, str]] = []
        self._client = redis.Redis(port=port)
        self._monitor = self._client.monitor().__enter__()
        self._thread = threading.Thread(target=self._listen, daemon=True)
        self._thread.start()

    def _listen(self) -> None:
        try:
            for command in self._monitor.listen():
                parts = command["command"].split(" ")
                if command.get("client_type") != "lua":
                    self.seen.append((parts[0].upper(), parts[1] if len(parts) > 1 else ""))
        except (redis.ConnectionError, ValueError, OSError):
            return

    def close(self) -> None:
        self._client.close()


def worker_redis(cluster: RedisClusterGroup, spider: str) -> WorkerRedis:
    """A worker's Redis side for ``spider``, its frontier split in 3 shards."""
    settings = load_settings(
        {"REDIS_URL": cluster.url, "REDIS_CLUSTER": "true", "FRONTIER_SHARDS": "3"}
    )
    keys = spider_keys(settings, spider)
    assert keys.sharded and keys.shards == 3
    state = RedisState(cluster.url, 0.01, 0.05, logging.getLogger("test.item_shards"))
    return WorkerRedis(
        async_client(settings, keys.prefix),
        keys,
        state,
        0.05,
        client_for=lambda key: async_client(settings, key),
        batcher_client=async_client(settings, keys.prefix),
    )


def test_a_pages_items_go_with_its_ack_into_its_shards_buffer(cluster):
    client = cluster.client
    keys = RedisKeys("s", cluster=True, shards=3)
    shard = keys.of_shard(1)
    node = cluster.master_of(shard.frontier_prefix)
    watch = Monitor(node.port)
    page = Lease.of(b"w:1:ab@1/7", b"{}", "h.example")

    async def main() -> int:
        redis_ = worker_redis(cluster, "s")
        batcher = redis_.batcher
        try:
            batcher.item(b'{"url": "item 1"}', 1)
            batcher.item(b'{"kind": "page", "url": "page state"}', 1)
            batcher.item(b'{"url": "of no page"}')
            batcher.ack(page, Outcome.PAGE, 1)
            assert await batcher.flush() == 0 and len(batcher) == 0
            return batcher.items_backlog
        finally:
            await redis_.aclose()

    try:
        backlog = asyncio.run(main())
        # MONITOR's lines come on their own connection: until the transaction's end.
        wait_until(lambda: ("LLEN", shard.items) in watch.seen[:-1], 10, what="the EXEC")
    finally:
        watch.close()
    assert node.client.lrange(shard.items, 0, -1) == [
        b'{"url": "item 1"}',
        b'{"kind": "page", "url": "page state"}',
    ]
    assert client.lrange(keys.items, 0, -1) == [b'{"url": "of no page"}']
    # The page's items and its ack in one MULTI/EXEC on the shard's master,
    # with the buffer's length read in it for backpressure.
    commands = [c for c in watch.seen if c[0] in ("MULTI", "EXEC", "RPUSH", "EVALSHA", "LLEN")]
    start = commands.index(("RPUSH", shard.items))
    assert commands[start - 1 : start + 4] == [
        ("MULTI", ""),
        ("RPUSH", shard.items),
        ("EVALSHA", commands[start + 1][1]),
        ("LLEN", shard.items),
        ("EXEC", ""),
    ]
    # The backlog: both buffers' lengths, each read in its own transaction.
    assert backlog == 3


def test_the_backlog_is_the_latest_length_of_each_buffer(cluster):
    """Each slot's transaction that pushed items reads its own buffer; a buffer
    drained meanwhile counts as read last, and a paused worker's own reading
    (``observe_backlog``) replaces what the transactions read."""
    client = cluster.client
    keys = RedisKeys("s2", cluster=True, shards=3)

    async def main() -> list[int]:
        redis_ = worker_redis(cluster, "s2")
        batcher, told = redis_.batcher, []
        batcher.backlog.subscribe(told.append)
        try:
            for n in range(3):
                batcher.item(b"a", n)
            await batcher.flush()
            first = batcher.items_backlog
            client.delete(keys.of_shard(0).items)  # a db_writer drained shard 0
            batcher.item(b"b", 2)
            await batcher.flush()
            second = batcher.items_backlog  # shard 0's last read still counts
            batcher.observe_backlog(keys.of_shard(0).frontier_prefix, 0)
            return [first, second, batcher.items_backlog, told[-1]]
        finally:
            await redis_.aclose()

    assert asyncio.run(main()) == [3, 4, 3, 4]
    assert [client.llen(k.items) for k in keys.all_shards] == [0, 1, 2]
