"""The write batcher never drops an op, whatever Redis answers (a real redis-server)."""

from __future__ import annotations

import asyncio
import logging

import pytest
import redis.asyncio

from spiders_project.frontier.lease_id import Lease
from spiders_project.frontier.outcomes import Outcome
from spiders_project.frontier.write_behind.batcher import RedisBatcher
from spiders_project.keys import RENDER, RedisKeys
from spiders_project.keys.cookies import cookie_jar
from spiders_project.redis_access import RedisCalls, RedisState
from spiders_project.redis_access.lua import LuaScript

K = RedisKeys("b")


def lease(lease_id: bytes) -> Lease:
    return Lease.of(lease_id, b"{}", "h")


def run(coro):
    return asyncio.run(coro)


async def batcher_for(redis_url: str) -> tuple[RedisBatcher, RedisState]:
    state = RedisState(redis_url, 0.01, 0.05, logging.getLogger("test.batcher"))
    client = redis.asyncio.Redis.from_url(redis_url, retry=None)
    return RedisBatcher(RedisCalls(client, state), K, 0.05), state


@pytest.mark.redis
def test_ops_survive_oom_in_order(redis_url, r, caplog):
    async def main() -> None:
        batcher, state = await batcher_for(redis_url)
        batcher.item(b"i1")
        batcher.enqueue("h", "1 123", 0, b'{"url":"http://h/1"}')
        batcher.item(b"i2")
        r.config_set("maxmemory-policy", "noeviction")
        r.config_set("maxmemory", 1)
        try:
            assert await batcher.flush() > 0
            assert len(batcher) == 3 and not state.writable
            batcher.item(b"i3")
            assert await batcher.flush() > 0
        finally:
            r.config_set("maxmemory", 0)
        assert await batcher.flush() == 0
        assert len(batcher) == 0 and state.writable
        await batcher.client.aclose()

    with caplog.at_level(logging.INFO, logger="test.batcher"):
        run(main())
    assert r.lrange(K.items, 0, -1) == [b"i1", b"i2", b"i3"]
    assert (
        r.zcard(K.host_queue("h")) + r.llen(K.host_list("h")) == 1
        and int(r.get(K.requests_size)) == 1
    )
    assert caplog.messages.count("Redis accepts writes again") == 1
    assert sum(m.startswith("Redis refuses writes (OOM") for m in caplog.messages) == 1


@pytest.mark.redis
def test_a_refused_command_keeps_its_ops_and_the_rest_goes(redis_url, r, caplog):
    """A broken key (WRONGTYPE) fails its own group inside EXEC; it is kept, the rest lands."""
    r.set(K.items, "not a list")

    async def main() -> None:
        batcher, _ = await batcher_for(redis_url)
        batcher.item(b"i1")
        batcher.enqueue("h", "1 123", 0, b'{"url":"http://h/1"}')
        batcher.push(K.requests_rejected, b"bad")
        assert await batcher.flush() > 0
        assert len(batcher) == 1
        assert await batcher.flush() > 0  # still broken: logged once
        r.delete(K.items)
        assert await batcher.flush() == 0 and len(batcher) == 0
        await batcher.client.aclose()

    with caplog.at_level(logging.INFO):
        run(main())
    assert r.lrange(K.items, 0, -1) == [b"i1"]
    assert r.zcard(K.host_queue("h")) + r.llen(K.host_list("h")) == 1 and r.lrange(
        K.requests_rejected, 0, -1
    ) == [b"bad"]
    refused = [m for m in caplog.messages if m.startswith("Redis refused RPUSH items")]
    assert len(refused) == 1, caplog.messages
    assert any(m.startswith("Redis took the writes it had refused") for m in caplog.messages)


@pytest.mark.redis
def test_redis_away_keeps_everything(redis_url, r):
    async def main() -> None:
        batcher, state = await batcher_for("redis://127.0.0.1:9/0")
        batcher.item(b"i1")
        batcher.ack(lease(b"w/1"))
        assert await batcher.flush() > 0
        assert len(batcher) == 2 and not state.connected
        await batcher.client.aclose()

    run(main())


@pytest.mark.redis
def test_an_ack_never_lands_without_the_links_of_its_tick(redis_url, r):
    """Under OOM a tick of links and acks is refused whole, though acks alone would pass."""
    r.zadd(K.leases, {b"w/1": 1})
    r.hset(K.lease_info, b"w/1", b"info")

    async def main() -> None:
        batcher, _ = await batcher_for(redis_url)
        batcher.enqueue("h", "1 123", 0, b'{"url":"http://h/1"}')
        batcher.ack(lease(b"w/1"))
        r.config_set("maxmemory-policy", "noeviction")
        r.config_set("maxmemory", 1)
        try:
            assert await batcher.flush() > 0
            assert r.zcard(K.leases) == 1, "the ack went without its links"
        finally:
            r.config_set("maxmemory", 0)
        assert await batcher.flush() == 0
        await batcher.client.aclose()

    run(main())
    assert r.zcard(K.leases) == 0 and r.zcard(K.host_queue("h")) + r.llen(K.host_list("h")) == 1


@pytest.mark.redis
def test_one_tick_writes_both_lanes_and_acks_each_in_its_own(redis_url, r):
    """An HTTP and a render request, and acks of leases from both queues, in one
    MULTI/EXEC: each lane's script gets its own entries (keys.LANES)."""
    render = K.in_lane(RENDER)

    async def main() -> None:
        batcher, _ = await batcher_for(redis_url)
        enqueued: list[tuple[int, int]] = []
        batcher.enqueued.subscribe(lambda sent, added: enqueued.append((sent, added)))
        batcher.enqueue("h", "1 123", 0, b'{"url":"http://h/1"}')
        batcher.enqueue("h", "1 456", 0, b'{"url":"http://h/2"}', lane=RENDER)
        # Leases of both queues, as lease.lua would leave them.
        r.zadd(K.leases, {"w:1:a/0": 1})
        r.zadd(render.leases, {"w:1:a+render/1": 1})
        batcher.ack(lease(b"w:1:a/0"))
        batcher.ack(lease(b"w:1:a+render/1"))
        assert await batcher.flush() == 0
        assert sorted(enqueued) == [(1, 1), (1, 1)]
        await batcher.client.aclose()

    run(main())
    assert r.llen(K.host_list("h")) == 1 and r.llen(render.host_list("h")) == 1
    assert int(r.get(K.requests_size)) == 1 == int(r.get(render.requests_size))
    assert r.zcard(K.leases) == 0 and r.zcard(render.leases) == 0
    # One seen-set for both: the same URL is not queued again in either lane.
    assert int(r.get(K.seen)) == 2


@pytest.mark.redis
def test_a_lost_script_cache_is_loaded_again_and_nothing_lands_twice(redis_url, r, caplog):
    """The tick's scripts go by SHA (transaction.BY_SHA). A cache Redis emptied
    (SCRIPT FLUSH here; a restart or a failover alike) fails them with NOSCRIPT
    while the tick's items land: the batcher loads the scripts, enqueue first,
    and sends the failed ops again at once; the items are not sent twice."""

    async def main() -> None:
        batcher, _ = await batcher_for(redis_url)
        for n in (1, 2):
            r.script_flush()
            batcher.item(b"i%d" % n)
            batcher.enqueue("h", f"1 12{n}", 0, b'{"url":"http://h/%d"}' % n)
            batcher.ack(lease(b"gone/%d" % n), Outcome.PAGE, 1)  # a lease long gone: acks nothing
            assert await batcher.flush() == 0
            assert len(batcher) == 0
            assert r.script_exists(batcher.scripts.enqueue.sha, batcher.scripts.ack.sha) == [1, 1]
        await batcher.client.aclose()

    with caplog.at_level(logging.INFO):
        run(main())
    assert r.lrange(K.items, 0, -1) == [b"i1", b"i2"]
    assert r.llen(K.host_list("h")) + r.zcard(K.host_queue("h")) == 2
    assert int(r.get(K.requests_size)) == 2
    lost = [m for m in caplog.messages if m.startswith("Redis lost its scripts")]
    assert len(lost) == 2
    assert not any("refused" in m for m in caplog.messages)


def test_a_held_lease_is_never_acked():
    """Outcome.HELD goes back to its queue (handoff.py): an ack of it is a bug, refused."""

    async def main() -> None:
        batcher, _ = await batcher_for("redis://127.0.0.1:9/0")
        with pytest.raises(ValueError, match="never acked"):
            batcher.ack(lease(b"w/1"), Outcome.HELD)
        assert len(batcher) == 0
        await batcher.client.aclose()

    run(main())


@pytest.mark.redis
def test_prior_writes_go_first_and_a_tick_waits_for_them(redis_url, r):
    """A prior write (a cookie jar's update) is in the tick's transaction on one
    Redis; on a sharded frontier it goes in a step before the links and acks,
    which wait whole while Redis refuses it (here: a key of the wrong type)."""
    sharded = RedisKeys("b", cluster=True, shards=2)
    jar = cookie_jar(sharded, "default")
    script = LuaScript("set", "return redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])")

    async def main() -> None:
        state = RedisState(redis_url, 0.01, 0.05, logging.getLogger("test.batcher"))
        client = redis.asyncio.Redis.from_url(redis_url, retry=None)
        calls = RedisCalls(client, state)
        batcher = RedisBatcher(calls, sharded, 0.05, calls_for=lambda keys: calls)
        delivered: list[object] = []
        batcher.priors_delivered.subscribe(lambda ops: delivered.extend(op.tag for op in ops))
        r.set(jar, "not a hash")
        batcher.prior(script, [jar], ["f", "v"], tag="update")
        batcher.enqueue("a.example", "", 0, b'{"u":"http://a.example/"}')
        batcher.item(b"i")
        assert await batcher.flush() > 0
        assert len(batcher) == 3 and delivered == []
        assert r.llen(sharded.items) == 0  # nothing of the tick went in
        assert r.get(sharded.for_host("a.example").requests_size) is None
        r.delete(jar)
        assert await batcher.flush() == 0 and len(batcher) == 0
        assert delivered == ["update"]
        assert r.hget(jar, "f") == b"v" and r.llen(sharded.items) == 1
        assert r.get(sharded.for_host("a.example").requests_size) == b"1"
        await client.aclose()

    run(main())
