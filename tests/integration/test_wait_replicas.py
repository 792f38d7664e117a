"""REDIS_WAIT_REPLICAS with a real master and replica: a tick counts as
written only once the replica has it; a stopped replica keeps the ops in the
worker, sent again until it confirms them."""

from __future__ import annotations

import asyncio
import logging
import signal

import pytest
import redis.asyncio

from spiders_project.frontier.write_behind.batcher import RedisBatcher
from spiders_project.keys import RedisKeys
from spiders_project.redis_access import RedisCalls, RedisState
from tests.support.processes import wait_until
from tests.support.services import RedisServer

K = RedisKeys("w")


@pytest.fixture
def pair():
    master = RedisServer()
    replica = RedisServer("--replicaof", "127.0.0.1", str(master.port))
    wait_until(
        lambda: replica.client.info("replication").get("master_link_status") == "up",
        30,
        what="the replica in sync",
    )
    # And the master counts it online (writes wait only for online replicas).
    wait_until(
        lambda: master.client.info("replication").get("slave0", {}).get("state") == "online",
        30,
        what="the master to see its replica online",
    )
    yield master, replica
    replica.stop()
    master.stop()


def test_writes_count_only_once_a_replica_confirms_them(pair, caplog):
    master, replica = pair

    async def main() -> None:
        state = RedisState(master.url, 0.01, 0.05, logging.getLogger("test.wait"))
        client = redis.asyncio.Redis.from_url(master.url, retry=None)
        batcher = RedisBatcher(
            RedisCalls(client, state), K, 0.05, wait_replicas=1, wait_timeout=0.2
        )
        batcher.item(b"i1")
        assert await batcher.flush() == 0 and len(batcher) == 0
        assert batcher.replicas == 1
        assert replica.client.lrange(K.items, 0, -1) == [b"i1"]
        # The replica stops answering: the master applies the tick, WAIT says 0.
        replica.executor.process.send_signal(signal.SIGSTOP)
        try:
            batcher.item(b"i2")
            assert await batcher.flush() > 0
            assert len(batcher) == 1, "kept: not on any replica"
            assert await batcher.flush() > 0 and len(batcher) == 1
        finally:
            replica.executor.process.send_signal(signal.SIGCONT)
        for _ in range(50):
            if await batcher.flush() == 0:
                break
            await asyncio.sleep(0.1)
        assert len(batcher) == 0
        await client.aclose()

    with caplog.at_level(logging.INFO):
        asyncio.run(main())
    # Sent again until confirmed: at least once (the db_writer upserts repeats).
    items = replica.client.lrange(K.items, 0, -1)
    assert items[0] == b"i1" and set(items[1:]) == {b"i2"}
    said = [m for m in caplog.messages if "confirmed" in m]
    assert len(said) == 2, said
    assert said[0].startswith("Writes not confirmed by 1 replica(s) within 200 ms (0 did)")
    assert said[1] == "Writes are confirmed by 1 replica(s) again"


def test_without_replicas_nothing_waits(redis_url, r):
    async def main() -> None:
        state = RedisState(redis_url, 0.01, 0.05, logging.getLogger("test.wait"))
        client = redis.asyncio.Redis.from_url(redis_url, retry=None)
        batcher = RedisBatcher(RedisCalls(client, state), K, 0.05, wait_replicas=1, wait_timeout=5)
        batcher.item(b"i1")
        assert await batcher.flush() == 0 and batcher.replicas == 0
        await client.aclose()

    asyncio.run(main())
    assert r.lrange(K.items, 0, -1) == [b"i1"]
