"""The frontier scheduler in-process: a crawler from the project settings, a private Redis.

No worker process and no engine: the scheduler runs on an asyncio loop of
the test's own, its scripts at a time the test sets (``ScriptClock``), and
what it writes is read back from Redis. Its refill and lease loops need a
running engine and are exercised by the process tests (tests/e2e).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from scrapy import Request

from spiders_project.config import ConfigError, load_settings
from spiders_project.frontier.calls import lease_call
from spiders_project.frontier.config import FrontierConfig
from spiders_project.frontier.lease_id import Lease
from spiders_project.frontier.queue import JsonPriorityQueue
from spiders_project.frontier.scheduler import FrontierScheduler
from spiders_project.keys import HTTP, RENDER, RedisKeys
from spiders_project.spiders.distributed import DistributedSpider
from tests.support.crawlers import project_crawler

K = RedisKeys("distributed")
T0 = 1_700_000_000_000  # the scripts' clock at the start (ms since the epoch)


def with_scheduler(
    redis_url: str, test: Callable[[FrontierScheduler], Awaitable[Any]], **settings: Any
) -> None:
    """Run ``test(scheduler)`` with a scheduler ready to enqueue, handing back afterwards.

    Its background loops are not started: they need a running engine.
    """

    async def main() -> None:
        crawler = project_crawler(DistributedSpider, {"REDIS_URL": redis_url, **settings})
        scheduler = FrontierScheduler.from_crawler(crawler)
        scheduler.redis.clock.set(T0)
        # What Scheduler.open does before its coroutine, without a Twisted reactor.
        scheduler.spider = DistributedSpider.from_crawler(crawler)
        scheduler.queue = JsonPriorityQueue(
            scheduler.server, scheduler.spider, scheduler.queue_key, scheduler.serializer
        )
        try:
            await test(scheduler)
        finally:
            await scheduler.hand_back()
            await scheduler.redis.client.aclose()

    asyncio.run(main())


async def lease(scheduler: FrontierScheduler, host: str, want: int, owner: str) -> list[Any]:
    """Lease from ``host`` as a worker named ``owner`` would: (id, request, host) triples."""
    keys, args = lease_call(
        scheduler.keys,
        want,
        scheduler.lease_ms,
        [(host, 0)],
        next_hosts=8,
        per_host=want,
        owner=owner,
        first_id=0,
        now=scheduler.redis.clock.arg(),
    )
    leased, *_ = await scheduler.redis.calls.script(scheduler.redis.scripts.lease, keys, args)
    return list(leased)


@pytest.mark.redis
def test_enqueue_dedups_in_redis_and_in_the_seen_cache(redis_url, r):
    async def test(scheduler: FrontierScheduler) -> None:
        assert scheduler.enqueue_request(Request("http://a.example/1"))
        assert scheduler.enqueue_request(Request("http://b.example/1"))
        # Sent once by this worker: the seen-cache drops it before Redis.
        assert not scheduler.enqueue_request(Request("http://a.example/1"))
        assert scheduler.has_pending_requests()
        await scheduler.redis.batcher.flush()
        assert not scheduler.has_pending_requests()
        assert scheduler.stats.get_value("dupefilter/filtered") == 1
        assert scheduler.stats.get_value("scheduler/enqueued/redis") == 2

    with_scheduler(redis_url, test)
    assert int(r.get(K.requests_size)) == 2
    assert r.zscore(K.hosts, "a.example") == T0  # ready at the scripts' clock
    assert int(r.get(K.seen)) == 2


@pytest.mark.redis
def test_an_unserializable_request_is_dropped_and_counted(redis_url, r):
    async def test(scheduler: FrontierScheduler) -> None:
        request = Request("http://a.example/1", meta={"handle": object()})
        assert not scheduler.enqueue_request(request)
        assert scheduler.stats.get_value("frontier/unserializable") == 1

    with_scheduler(redis_url, test)
    assert r.get(K.requests_size) is None


@pytest.mark.redis
def test_an_expired_lease_of_another_worker_is_reclaimed_once_its_deadline_passes(redis_url, r):
    async def test(scheduler: FrontierScheduler) -> None:
        scheduler.enqueue_request(Request("http://a.example/1"))
        await scheduler.redis.batcher.flush()
        (lease_id, _, _) = await lease(scheduler, "a.example", 1, owner="dead-worker")
        clock = scheduler.redis.clock
        clock.advance(scheduler.lease_ms - 1)
        assert await scheduler.leases.reclaim_expired() == 0  # not yet
        clock.advance(1)
        assert await scheduler.leases.reclaim_expired() == 1
        assert await scheduler.leases.reclaim_expired() == 0  # only once
        assert scheduler.stats.get_value("frontier/leases_reclaimed") == 1
        assert not r.hexists(K.lease_info, lease_id)

    with_scheduler(redis_url, test, FRONTIER_LEASE_TIMEOUT=30)
    assert int(r.get(K.requests_size)) == 1 and r.zcard(K.leases) == 0


@pytest.mark.redis
def test_renewal_keeps_a_live_workers_leases_past_their_first_deadline(redis_url, r):
    async def test(scheduler: FrontierScheduler) -> None:
        for n in range(2):
            scheduler.enqueue_request(Request(f"http://a.example/{n}"))
        await scheduler.redis.batcher.flush()
        mine, _, _, theirs, _, _ = await lease(scheduler, "a.example", 2, owner="w")
        clock = scheduler.redis.clock
        clock.advance(scheduler.lease_ms // 2)
        await scheduler.leases.renew([Lease.of(mine, b"", "a.example")])
        clock.advance(scheduler.lease_ms // 2)
        assert await scheduler.leases.reclaim_expired() == 1  # theirs, not mine
        assert r.zrange(K.leases, 0, -1) == [mine]
        assert not r.hexists(K.lease_info, theirs)

    with_scheduler(redis_url, test, FRONTIER_LEASE_TIMEOUT=30)


@pytest.mark.redis
def test_a_bad_entry_is_set_aside_acked_and_counted(redis_url, r):
    bad = b'{"url": "http://a.example/x", "encoding": "nope"}'

    async def test(scheduler: FrontierScheduler) -> None:
        bad_lease = Lease.of(b"w/1", bad, "a.example")
        assert scheduler.bad_entries.decode(scheduler.queue, bad_lease) is None
        assert scheduler.stats.get_value("frontier/rejected") == 1
        assert scheduler.bad_entries.host_names([b"ok.example", b"\xff\xfe"]) == ["ok.example"]
        assert scheduler.stats.get_value("frontier/rejected") == 2
        await scheduler.redis.batcher.flush()

    r.zadd(K.hosts, {b"\xff\xfe": 0})
    with_scheduler(redis_url, test)
    assert set(r.lrange(K.requests_rejected, 0, -1)) >= {bad}
    assert r.zscore(K.hosts, b"\xff\xfe") is None


@pytest.mark.redis
def test_close_hands_back_what_was_prefetched(redis_url, r):
    async def test(scheduler: FrontierScheduler) -> None:
        scheduler.enqueue_request(Request("http://a.example/1"))
        await scheduler.redis.batcher.flush()
        (lease_id, member, host) = await lease(scheduler, "a.example", 1, owner="w")
        request = scheduler.queue.decode(member)
        scheduler._prefetched.append((request, Lease.of(lease_id, member, host.decode())))
        assert len(scheduler) == 1

    with_scheduler(redis_url, test)
    assert r.zcard(K.leases) == 0 and int(r.get(K.requests_size)) == 1


class DropsAfterLease:
    """A step that drops, after their lease, the requests whose URL says so."""

    def __init__(self, crawler) -> None:
        self.stats = crawler.stats

    @classmethod
    def from_crawler(cls, crawler) -> DropsAfterLease:
        return cls(crawler)

    def leased(self, request: Request) -> Request | None:
        if "drop" in request.url:
            self.stats.inc_value("test/dropped_after_lease")
            return None
        return request


@pytest.mark.redis
def test_a_step_that_drops_a_leased_request_ends_its_lease(redis_url, r):
    async def test(scheduler: FrontierScheduler) -> None:
        for path in ("drop-1", "keep", "drop-2"):
            scheduler.enqueue_request(Request(f"http://a.example/{path}"))
        await scheduler.redis.batcher.flush()
        leased = await lease(scheduler, "a.example", 3, "w")
        for lease_id, member, host in zip(leased[::3], leased[1::3], leased[2::3], strict=True):
            request = scheduler.queue.decode(member)
            scheduler._prefetched.append((request, Lease.of(lease_id, member, host.decode())))
        assert r.zcard(K.leases) == 3
        kept = scheduler.next_request()
        assert kept is not None and kept.url == "http://a.example/keep"
        assert scheduler.next_request() is None  # the last one was dropped too
        assert scheduler.stats.get_value("test/dropped_after_lease") == 2
        assert scheduler.stats.get_value("scheduler/dequeued/redis") == 1
        await scheduler.redis.batcher.flush()
        # The two dropped leases ended; the kept one is still held.
        assert r.zcard(K.leases) == 1
        # Unfinished (no engine here): handed back at the end, like a prefetched one.
        scheduler._prefetched.append((kept, scheduler._active.pop(kept)))

    with_scheduler(
        redis_url,
        test,
        FRONTIER_STEPS={f"{__name__}.DropsAfterLease": 800},
        CONCURRENT_REQUESTS_PER_DOMAIN=3,
    )


@pytest.mark.redis
def test_the_steps_decide_url_group_lane_and_wait_of_what_is_queued(redis_url, r):
    """The default steps, through the scheduler: a normalised URL under its
    politeness group, a retry waiting its backoff, a trap not queued."""

    async def test(scheduler: FrontierScheduler) -> None:
        assert scheduler.enqueue_request(Request("http://A.example:80/p?utm_source=x&q=1"))
        retry = Request("http://b.example/r", meta={"_retry_wait_ms": 60_000}, dont_filter=True)
        assert scheduler.enqueue_request(retry)
        assert not scheduler.enqueue_request(Request("http://a.example/" + "x/" * 2100))
        await scheduler.redis.batcher.flush()
        assert scheduler.stats.get_value("scope/url_too_long") == 1

    with_scheduler(redis_url, test)
    (member,) = r.lrange(K.host_list("a.example"), 0, -1)
    assert b'"http://a.example/p?q=1"' in member
    assert r.zcard(K.host_queue("b.example")) == 0  # waiting out its backoff
    assert r.zcard(K.host_later("b.example")) == 1


@pytest.mark.redis
def test_a_queue_found_empty_is_not_asked_again_until_the_poll_or_new_work(redis_url, r):
    """A worker of both lanes with only HTTP work asks its empty render queue once
    per FRONTIER_EMPTY_POLL_INTERVAL, not after every lease call (a round trip each,
    which 10 ms from Redis cost a third of its pages/s), and at once when it
    enqueued something, which may have gone to either lane."""

    async def test(scheduler: FrontierScheduler) -> None:
        http, render = scheduler.keys.in_lane(HTTP), scheduler.keys.in_lane(RENDER)
        scheduler.enqueue_request(Request("http://a.example/1"))
        await scheduler.redis.batcher.flush()
        taker, queue = scheduler.taker, scheduler.queue
        assert taker.due(http) and taker.due(render)
        taken = await taker.take(render, scheduler.redis.calls, 4, queue)
        assert taken.leased == 0 and taken.wait_ms < 0
        assert not taker.due(render)  # found empty: left alone for the poll interval
        taken = await taker.take(http, scheduler.redis.calls, 4, queue)
        assert taken.more and taker.due(http)  # hosts are ready: asked again at once
        taken = await taker.take(http, scheduler.redis.calls, 4, queue)
        assert taken.leased == 1 and taker.due(http)
        scheduler._prefetched.extend((req, lease) for req, lease, _ in taken.requests)
        # Nothing wanted and no spare to ask for: no call at all.
        calls = scheduler.stats.get_value("redis/round_trips", 0)
        assert (await taker.take(render, scheduler.redis.calls, 0, queue)).leased == 0
        assert scheduler.stats.get_value("redis/round_trips", 0) == calls
        await asyncio.sleep(0.2)
        assert taker.due(render)  # the poll interval passed
        await taker.take(render, scheduler.redis.calls, 4, queue)
        assert not taker.due(render)
        scheduler.enqueue_request(Request("http://b.example/1", meta={"render": True}))
        await scheduler.redis.batcher.flush()
        assert taker.due(render)  # this worker enqueued: any lane may have work
        await taker.take(render, scheduler.redis.calls, 4, queue)  # names the host
        taken = await taker.take(render, scheduler.redis.calls, 4, queue)
        assert [req.url for req, _, _ in taken.requests] == ["http://b.example/1"]
        scheduler._prefetched.extend((req, lease) for req, lease, _ in taken.requests)

    with_scheduler(redis_url, test, FRONTIER_EMPTY_POLL_INTERVAL=0.15)


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("FRONTIER_LEASE_TIMEOUT", 0),
        ("FRONTIER_FLUSH_INTERVAL", -1),
        ("FRONTIER_PREFETCH", "many"),
        ("CONCURRENT_REQUESTS", 0),
    ],
)
def test_a_bad_frontier_setting_is_refused_with_its_name(setting, value):
    """FRONTIER_LEASE_TIMEOUT=0 made the lease loop spin before FrontierConfig checked it."""
    with pytest.raises(ConfigError, match=f"^{setting}="):
        FrontierConfig.from_settings(load_settings({setting: value}))


def test_the_frontier_config_of_the_project_settings():
    config = FrontierConfig.from_settings(load_settings({"FRONTIER_LEASE_TIMEOUT": "12"}))
    assert config.lease_timeout == 12.0 and config.renew_interval == 4.0
    assert config.persist is True and config.concurrency >= 1
