"""Shared cookie jars against a real redis-server: the update script, the reads
that make a worker's copy causal, and what a crawl without cookies costs."""

from __future__ import annotations

import asyncio
import logging
import time

import redis.asyncio
from scrapy import Request
from scrapy.http import Response
from scrapy.utils.test import get_crawler

from spiders_project.cookies.config import CookiesConfig
from spiders_project.cookies.middleware import SharedCookiesMiddleware
from spiders_project.cookies.store import SharedJars
from spiders_project.crawl.meta import LEASED_AT
from spiders_project.frontier.calls import lease_call
from spiders_project.frontier.context import WorkerRedis
from spiders_project.frontier.write_behind.ops import PRIOR
from spiders_project.keys import RedisKeys
from spiders_project.keys.cookies import cookie_counts, cookie_jar, cookie_jars
from spiders_project.redis_access import RedisState

K = RedisKeys("c")
SITE = "http://shop.example"
CONFIG = CookiesConfig(enabled=True, shared=True, jar_ttl=600.0, debug=False)


class Worker:
    """One worker's Redis context and cookie middleware, with its round trips counted."""

    def __init__(self, redis_url: str, config: CookiesConfig = CONFIG) -> None:
        self.crawler = get_crawler()
        client = redis.asyncio.Redis.from_url(redis_url, retry=None)
        state = RedisState(redis_url, 0.01, 0.05, logging.getLogger("test.cookies"))
        self.redis = WorkerRedis(client, K, state, 0.05, crawler=self.crawler)
        self.jars = SharedJars(self.redis, config, self.crawler.stats)
        self.mw = SharedCookiesMiddleware(self.jars)

    @property
    def round_trips(self) -> int:
        return int(self.crawler.stats.get_value("redis/round_trips", 0))

    async def answer(self, url: str, *set_cookies: str, jar: object = None) -> None:
        request = Request(url, meta={"cookiejar": jar} if jar is not None else {})
        headers = {"Set-Cookie": list(set_cookies)} if set_cookies else {}
        await self.mw.process_response(request, Response(url, headers=headers))

    async def send(self, url: str, leased_at: float | None = None, jar: object = None) -> bytes:
        meta: dict = {} if leased_at is None else {LEASED_AT: leased_at}
        if jar is not None:
            meta["cookiejar"] = jar
        request = Request(url, meta=meta)
        await self.mw.process_request(request)
        return request.headers.get("Cookie") or b""

    async def close(self) -> None:
        await self.redis.aclose()


def test_an_update_goes_in_as_one_prior_script_and_another_worker_sends_it(redis_url, r):
    async def main() -> None:
        a, b = Worker(redis_url), Worker(redis_url)
        await a.answer(f"{SITE}/login", "session=s1; Path=/; HttpOnly", "pre=x; Path=/login")
        assert [op.kind for op in a.redis.batcher._ops] == [PRIOR]
        assert await a.redis.batcher.flush() == 0
        leased = time.monotonic()
        assert await b.send(f"{SITE}/account", leased) == b"session=s1"
        assert await b.send(f"{SITE}/login", leased) in (b"pre=x; session=s1", b"session=s1; pre=x")
        await a.close()
        await b.close()

    asyncio.run(main())
    jar = cookie_jar(K, "default")
    fields = r.hgetall(jar)
    assert set(fields) == {b"~v", b"shop.example\t/\tsession", b"shop.example\t/login\tpre"}
    assert 0 < r.pttl(jar) <= 600_000
    assert r.zscore(cookie_jars(K), "default") is not None
    assert r.hget(cookie_counts(K), "default") == b"2"
    assert jar.startswith("cookies:c:")


def test_the_requests_of_one_lease_share_one_read_and_an_unchanged_jar_costs_one_command(
    redis_url, r
):
    async def main() -> None:
        a, b = Worker(redis_url), Worker(redis_url)
        await a.answer(f"{SITE}/", "session=s1; Path=/")
        await a.redis.batcher.flush()
        leased = time.monotonic()
        before = b.round_trips
        headers = await asyncio.gather(*(b.send(f"{SITE}/p/{n}", leased) for n in range(20)))
        assert set(headers) == {b"session=s1"}
        assert b.round_trips - before == 2  # HGET ~v, then HGETALL: the jar was new to b
        # The next lease call's requests: one HGET, the jar did not move.
        leased = time.monotonic()
        before = b.round_trips
        await asyncio.gather(*(b.send(f"{SITE}/q/{n}", leased) for n in range(20)))
        assert b.round_trips - before == 1
        # Requests leased before the last read started need no read at all.
        before = b.round_trips
        await b.send(f"{SITE}/r", leased)
        assert b.round_trips == before
        assert b.crawler.stats.get_value("cookies/reads") == 1
        await a.close()
        await b.close()

    asyncio.run(main())


def test_a_lease_call_carries_the_jar_version_read_so_an_unchanged_jar_costs_no_round_trip(
    redis_url, r
):
    async def lease_call_of(w: Worker) -> float:
        """One lease call of ``w``, with what rides on it; its requests' LEASED_AT."""
        reads = w.redis.lease_reads(w.redis.calls)
        fields = [f for read in reads for f in read.fields]
        owner = w.redis.lease_prefix(K)
        keys, args = lease_call(K, 4, 60_000, [], 8, 2, owner, 0, reads=fields)
        *_, values = await w.redis.calls.script(w.redis.scripts.lease, keys, args)
        at = time.monotonic()
        for read in reads:
            read.answered(at, values[: len(read.fields)])
            values = values[len(read.fields) :]
        return at

    async def main() -> None:
        a, b = Worker(redis_url), Worker(redis_url)
        await a.answer(f"{SITE}/", "session=s1; Path=/")
        await a.redis.batcher.flush()
        assert await b.send(f"{SITE}/p", time.monotonic()) == b"session=s1"  # b uses the jar
        assert [f for read in b.redis.lease_reads(b.redis.calls) for f in read.fields] == [
            (cookie_jar(K, "default"), "~v")
        ]
        await lease_call_of(b)  # (loads the script: NOSCRIPT, a round trip more)
        before = b.round_trips
        leased = await lease_call_of(b)
        headers = await asyncio.gather(*(b.send(f"{SITE}/q/{n}", leased) for n in range(5)))
        assert set(headers) == {b"session=s1"}
        assert b.round_trips - before == 1  # the lease call alone: the jar did not move
        reads = b.crawler.stats.get_value("cookies/version_reads")
        # The jar moves: the version that rode with the next call says so, and
        # the jar is read again before its requests go out with the new cookie.
        await a.answer(f"{SITE}/", "session=s2; Path=/")
        await a.redis.batcher.flush()
        leased = await lease_call_of(b)
        assert b.jars.jar("default").syncing is not None  # read ahead at once
        assert await b.send(f"{SITE}/r", leased) == b"session=s2"
        assert b.crawler.stats.get_value("cookies/version_reads") == reads + 1  # read ahead
        # Where reads cannot ride (a Redis Cluster), the jars in use are read ahead.
        await a.answer(f"{SITE}/", "session=s3; Path=/")
        await a.redis.batcher.flush()
        read = b.jars._lease_read(False)
        assert read.fields == []
        leased = time.monotonic()
        read.answered(leased, None)
        assert b.jars.jar("default").syncing is not None
        assert await b.send(f"{SITE}/s", leased) == b"session=s3"
        await a.close()
        await b.close()

    asyncio.run(main())


def test_a_crawl_without_cookies_writes_nothing(redis_url, r):
    async def main() -> None:
        w = Worker(redis_url)
        for n in range(5):
            assert await w.send(f"{SITE}/p/{n}", time.monotonic()) == b""
            await w.answer(f"{SITE}/p/{n}")
        assert len(w.redis.batcher) == 0
        await w.close()

    asyncio.run(main())
    assert r.keys("*") == []


def test_a_cookie_the_server_removes_leaves_the_shared_jar(redis_url, r):
    async def main() -> None:
        a, b = Worker(redis_url), Worker(redis_url)
        await a.answer(f"{SITE}/", "session=s1; Path=/", "consent=yes; Path=/")
        await a.redis.batcher.flush()
        assert await b.send(f"{SITE}/", time.monotonic()) in (
            b"session=s1; consent=yes",
            b"consent=yes; session=s1",
        )
        await b.answer(f"{SITE}/forget", "consent=; Path=/; Expires=Thu, 01 Jan 1970 00:00:00 GMT")
        await b.redis.batcher.flush()
        assert await a.send(f"{SITE}/", time.monotonic()) == b"session=s1"
        await a.close()
        await b.close()

    asyncio.run(main())
    assert set(r.hgetall(cookie_jar(K, "default"))) == {b"~v", b"shop.example\t/\tsession"}
    assert r.hget(cookie_counts(K), "default") == b"1"


def test_jars_are_kept_apart(redis_url, r):
    async def main() -> None:
        a, b = Worker(redis_url), Worker(redis_url)
        await a.answer(f"{SITE}/login", "session=alice; Path=/", jar="alice")
        await a.answer(f"{SITE}/login", "session=bob; Path=/", jar=2)
        await a.redis.batcher.flush()
        leased = time.monotonic()
        assert await b.send(f"{SITE}/x", leased, jar="alice") == b"session=alice"
        assert await b.send(f"{SITE}/x", leased, jar="2") == b"session=bob"
        assert await b.send(f"{SITE}/x", leased) == b""
        await a.close()
        await b.close()

    asyncio.run(main())
    assert set(r.zrange(cookie_jars(K), 0, -1)) == {b"alice", b"2"}


def test_a_workers_own_change_survives_a_read_that_missed_it(redis_url, r):
    async def main() -> None:
        a, b = Worker(redis_url), Worker(redis_url)
        await b.answer(f"{SITE}/", "theirs=1; Path=/")
        await b.redis.batcher.flush()
        await a.answer(f"{SITE}/", "mine=1; Path=/")  # not yet sent
        # A's read sees b's change (the version moved) but not its own.
        assert await a.send(f"{SITE}/", time.monotonic()) in (
            b"theirs=1; mine=1",
            b"mine=1; theirs=1",
        )
        await a.redis.batcher.flush()
        assert await a.send(f"{SITE}/", time.monotonic()) in (
            b"theirs=1; mine=1",
            b"mine=1; theirs=1",
        )
        assert a.jars.jar("default").pending == []
        await a.close()
        await b.close()

    asyncio.run(main())


def test_a_jar_deleted_in_redis_is_emptied_in_every_copy_and_made_again_with_a_new_version(
    redis_url, r
):
    async def main() -> None:
        a, b = Worker(redis_url), Worker(redis_url)
        await a.answer(f"{SITE}/", "session=s1; Path=/")
        await a.redis.batcher.flush()
        assert await b.send(f"{SITE}/", time.monotonic()) == b"session=s1"
        old = int(r.hget(cookie_jar(K, "default"), "~v"))
        r.delete(cookie_jar(K, "default"))  # scrapy cookies clear, or the TTL
        assert await b.send(f"{SITE}/", time.monotonic()) == b""
        await a.answer(f"{SITE}/", "session=s2; Path=/")
        await a.redis.batcher.flush()
        assert int(r.hget(cookie_jar(K, "default"), "~v")) != old
        assert await b.send(f"{SITE}/", time.monotonic()) == b"session=s2"
        await a.close()
        await b.close()

    asyncio.run(main())


def test_a_jar_in_use_is_renewed_and_an_idle_one_leaves_the_index(redis_url, r):
    async def main() -> None:
        config = CookiesConfig(enabled=True, shared=True, jar_ttl=2.0, debug=False)
        a = Worker(redis_url, config)
        a.redis.clock.set(1_000_000)
        await a.answer(f"{SITE}/", "session=s1; Path=/", jar="old")
        await a.redis.batcher.flush()
        a.redis.clock.set(1_000_000 + 5_000)
        await a.answer(f"{SITE}/", "session=s2; Path=/", jar="new")
        await a.redis.batcher.flush()
        assert r.zrange(cookie_jars(K), 0, -1) == [b"new"]
        assert r.hkeys(cookie_counts(K)) == [b"new"]
        # Using a jar renews it, at most once a touch interval (here 1 s).
        r.pexpire(cookie_jar(K, "new"), 300)
        await a.send(f"{SITE}/", time.monotonic(), jar="new")
        a.jars.jar("new").touched = float("-inf")
        await a.send(f"{SITE}/", time.monotonic(), jar="new")
        await a.redis.batcher.flush()
        assert r.pttl(cookie_jar(K, "new")) > 1000
        await a.close()

    asyncio.run(main())
