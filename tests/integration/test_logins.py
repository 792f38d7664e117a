"""Logging in again against a real redis-server: ``lua/session.lua`` passes the
same cases as the rules on a worker's own jars (tests/unit/test_logins.py),
two workers' expired answers start one login, a jar is pinned to a proxy by
its first cookie (or the first request that sends one), cookies that come
back through a retired session's proxy are refused, and a banned proxy
retires a session once for the cluster."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest
import redis.asyncio
from scrapy import Request
from scrapy.http import Response
from scrapy.utils.test import get_crawler

from spiders_project.config import load_settings
from spiders_project.cookies import codec
from spiders_project.cookies.config import CookiesConfig, LoginConfig
from spiders_project.cookies.pins import ProxyPins
from spiders_project.cookies.session_store import RedisSessions
from spiders_project.cookies.sessions import LOGIN, PROXY_FIELD, WAIT
from spiders_project.cookies.store import LocalJar, SharedJars
from spiders_project.crawl.meta import LEASED_AT, PROXY_PIN
from spiders_project.frontier.context import WorkerRedis
from spiders_project.keys import RedisKeys
from spiders_project.keys.cookies import cookie_counts, cookie_jar
from spiders_project.politeness.delays import HostPoliteness
from spiders_project.proxies.config import ProxyConfig
from spiders_project.proxies.pool import ProxyPool
from spiders_project.redis_access import RedisState
from tests.support.login.session_cases import ATTEMPTS, CASES, TIMEOUT_MS, Harness

K = RedisKeys("c")
SITE = "http://shop.example"
JARS = CookiesConfig(enabled=True, shared=True, jar_ttl=600.0, debug=False)
LOGINS = LoginConfig(timeout=TIMEOUT_MS / 1000, attempts=ATTEMPTS)
P1, P2 = "http://127.0.0.1:1", "http://127.0.0.1:2"


class Worker:
    """One worker's Redis context, shared jars and their sessions."""

    def __init__(self, redis_url: str) -> None:
        self.crawler = get_crawler()
        client = redis.asyncio.Redis.from_url(redis_url, retry=None)
        state = RedisState(redis_url, 0.01, 0.05, logging.getLogger("test.logins"))
        self.redis = WorkerRedis(client, K, state, 0.05, crawler=self.crawler)
        self.jars = SharedJars(self.redis, JARS, self.crawler.stats)
        self.sessions = RedisSessions(self.jars, LOGINS)

    async def read(self, jar: str = "default") -> LocalJar:
        """Everything sent is in; the jar read as for a request leased now."""
        await self.redis.batcher.flush()
        return await self.jars.fresh(jar, time.monotonic())

    def answer(self, local: LocalJar, set_cookie: str, via: str | None = None) -> None:
        """A response through ``via`` that sets ``set_cookie`` in ``local``."""
        before = codec.snapshot(local.cookies)
        response = Response(f"{SITE}/", headers={"Set-Cookie": set_cookie})
        local.cookies.extract_cookies(response, Request(f"{SITE}/"))
        self.jars.changed(local, before, via)

    async def names(self, jar: str = "default") -> set[str]:
        fields = await self.redis.client.hkeys(cookie_jar(K, jar))
        return {f.decode().split("\t")[-1] for f in fields if not f.startswith(b"~")}

    async def close(self) -> None:
        await self.redis.aclose()


@pytest.mark.parametrize("case", CASES, ids=[case.__name__ for case in CASES])
def test_the_session_script_passes_the_cases_of_the_rules(case, redis_url, r):
    async def main() -> None:
        w = Worker(redis_url)
        local = await w.read()

        async def settle() -> LocalJar:
            return await w.read()

        async def set_cookie(name: str, via: str | None) -> None:
            w.answer(h.local, f"{name}=1; Path=/", via)

        h = Harness(w.sessions, local, w.redis.clock.set, settle, set_cookie, w.names)
        await case(h)
        await w.close()

    asyncio.run(main())


def test_of_two_workers_whose_answers_find_the_session_expired_one_logs_in(redis_url, r):
    async def main() -> None:
        a, b = Worker(redis_url), Worker(redis_url)
        a.answer(await a.read(), "session=s1; Path=/")
        ja, jb = await a.read(), await b.read()
        outcomes = await asyncio.gather(
            a.sessions.expired(ja, sent=ja.version, token="a"),
            b.sessions.expired(jb, sent=jb.version, token="b"),
        )
        assert sorted(o.what for o in outcomes) == [LOGIN, WAIT]
        # Every copy read after it sees the login under way.
        for w in (a, b):
            assert w.sessions.session(await w.read()).running(w.sessions.now_ms())
        await a.close()
        await b.close()

    asyncio.run(main())


def test_a_login_that_ended_well_is_written_behind_the_cookies_of_its_answer(redis_url, r):
    async def main() -> None:
        a, b = Worker(redis_url), Worker(redis_url)
        local = await a.read()
        await a.sessions.expired(local, sent=local.version, token="t")
        # The login's answer: its session cookie, then its end, in one tick.
        a.answer(local, "session=s2; Path=/")
        a.sessions.ended_ok(local, "t")
        assert [op.kind for op in a.redis.batcher._ops] == ["prior", "prior"]
        await a.redis.batcher.flush()
        seen = await b.read()
        assert b.sessions.session(seen).state == "ok"
        assert [c.value for c in seen.cookies] == ["s2"]
        await a.close()
        await b.close()

    asyncio.run(main())


def test_cookies_through_a_retired_sessions_proxy_never_come_back(redis_url, r):
    async def main() -> None:
        a, b = Worker(redis_url), Worker(redis_url)
        local = await a.read()
        await a.sessions.pin(local, P1)
        a.answer(local, "session=s1; Path=/", P1)
        stale = await b.read()
        assert stale.control[PROXY_FIELD] == P1
        # b's answer through p1 is on its way while a retires the session.
        b.answer(stale, "session=s1b; Path=/", P1)
        await a.sessions.retire(await a.read(), P1, P2)
        await b.redis.batcher.flush()
        assert await a.names() == set()
        assert r.hget(cookie_counts(K), "default") == b"0"
        again = await b.read()
        assert again.control[PROXY_FIELD] == P2 and list(again.cookies) == []
        await a.close()
        await b.close()

    asyncio.run(main())


def proxy_pins(w: Worker) -> ProxyPins:
    settings = load_settings(
        {"PROXIES": f"{P1},{P2}", "PROXY_BAN_TIME": 600, "PROXY_REFRESH_INTERVAL": 0.05}
    )
    assert w.crawler.stats is not None
    pool = ProxyPool(ProxyConfig.from_settings(settings), w.redis, w.crawler.stats)
    groups = HostPoliteness.from_settings(settings)
    return ProxyPins(pool, groups, w.sessions, w.jars, w.crawler.stats)


def test_a_jar_is_pinned_by_its_first_cookie_to_the_proxy_it_came_through(redis_url, r):
    async def main() -> None:
        a, b = Worker(redis_url), Worker(redis_url)
        pa, pb = proxy_pins(a), proxy_pins(b)
        # No session yet: nothing to keep on one address, PROXY_MODE chooses.
        first = Request(f"{SITE}/", meta={LEASED_AT: time.monotonic()})
        local = await pa.pin(first, await a.read())
        assert PROXY_PIN not in first.meta and PROXY_FIELD not in local.control
        # Both workers' first pages set a session, through different proxies:
        # the jar keeps the one that came in first, with its proxy.
        jb = await b.read()
        a.answer(local, "session=s1; Path=/", P1)
        assert local.control[PROXY_FIELD] == P1  # this worker's copy at once
        await a.redis.batcher.flush()
        b.answer(jb, "session=s2; Path=/", P2)
        await b.redis.batcher.flush()
        assert r.hget(cookie_jar(K, "default"), "~proxy") == P1.encode()
        for w, p in ((a, pa), (b, pb)):
            request = Request(f"{SITE}/p/1")
            seen = await p.pin(request, await w.read())
            assert request.meta[PROXY_PIN] == P1
            assert [c.value for c in seen.cookies] == ["s1"]
        assert a.crawler.stats.get_value("cookies/sessions_retired") is None
        await a.close()
        await b.close()

    asyncio.run(main())


def test_cookies_set_without_a_proxy_pin_the_jar_with_the_first_request_that_sends_them(
    redis_url, r
):
    async def main() -> None:
        a = Worker(redis_url)
        pa = proxy_pins(a)
        a.answer(await a.read(), "consent=yes; Path=/")  # a browser's, or the spider's own
        request = Request(f"{SITE}/p/1", meta={LEASED_AT: time.monotonic()})
        local = await pa.pin(request, await a.read())
        assert request.meta[PROXY_PIN] in (P1, P2)
        assert r.hget(cookie_jar(K, "default"), "~proxy") == request.meta[PROXY_PIN].encode()
        assert local.control[PROXY_FIELD] == request.meta[PROXY_PIN]
        # A request that brings its own cookies to an empty jar takes them out: pinned too.
        own = Request(f"{SITE}/", cookies={"lang": "en"}, meta={"cookiejar": "own"})
        await pa.pin(own, await a.read("own"))
        assert own.meta[PROXY_PIN] in (P1, P2)
        await a.close()

    asyncio.run(main())


def test_a_banned_proxy_retires_the_session_once_for_the_cluster(redis_url, r):
    async def main() -> None:
        a, b = Worker(redis_url), Worker(redis_url)
        pa, pb = proxy_pins(a), proxy_pins(b)
        first = Request(f"{SITE}/", meta={LEASED_AT: time.monotonic()})
        local = await pa.pin(first, await a.read())
        assert PROXY_PIN not in first.meta
        # Its answer came through P2 and set the session.
        pinned = P2
        a.answer(local, "session=s1; Path=/", pinned)
        await a.redis.batcher.flush()
        # b's requests of the jar go through the same proxy.
        other = Request(f"{SITE}/p/1")
        await pb.pin(other, await b.read())
        assert other.meta[PROXY_PIN] == pinned
        # A site blocks it: a bans it for the cluster, b learns it at its next refresh.
        pa.pool.ban(pinned, "403")
        await a.redis.batcher.flush()
        await asyncio.sleep(0.1)
        after = Request(f"{SITE}/p/2")
        local = await pb.pin(after, await b.read())
        moved = after.meta[PROXY_PIN]
        assert moved != pinned and list(local.cookies) == []
        late = Request(f"{SITE}/p/3")
        await pa.pin(late, await a.read())
        assert late.meta[PROXY_PIN] == moved
        retired = [w.crawler.stats.get_value("cookies/sessions_retired", 0) for w in (a, b)]
        assert sorted(retired) == [0, 1]
        assert await a.names() == set()
        await a.close()
        await b.close()

    asyncio.run(main())
