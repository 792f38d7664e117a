"""Politeness in-process: delays per host, the dispatch gate and Retry-After, on a private Redis.

The gate and the pause script run at a time the test sets (``ScriptClock``):
a turn is granted once the test steps the clock past it, never by sleeping.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest
from scrapy import Request
from scrapy.http import Response

from spiders_project.config import ConfigError, load_settings
from spiders_project.politeness.delays import HostPoliteness
from spiders_project.politeness.middlewares import SitePacingMiddleware, retry_after_seconds
from spiders_project.politeness.turns import HostTurns
from spiders_project.spiders.distributed import DistributedSpider
from tests.support.crawlers import project_crawler
from tests.support.processes import K

T0 = 1_700_000_000_000


def politeness(**settings) -> HostPoliteness:
    return HostPoliteness.from_settings(load_settings(settings))


def test_delays_per_host_with_the_guard_and_what_sites_ask():
    p = politeness(
        DOWNLOAD_DELAY=0.5,
        HOST_DOWNLOAD_DELAYS={"Slow.Example:80": 2, "fast.example": 0},
        POLITENESS_GUARD=0.01,
    )
    assert p.delay_ms("other.example") == 500
    assert p.delay_ms("slow.example") == 2000, "hosts are compared in one spelling"
    assert p.gate_ms("fast.example") == 0, "no delay: the gate is not asked"
    assert p.gate_ms("other.example") == 510
    p.site_asked("other.example", 3000)  # robots.txt Crawl-delay: 3
    assert p.gate_ms("other.example") == 3010
    assert p.delay_ms("other.example") == 500, "the lease script reads the site's own from Redis"


@pytest.mark.parametrize(
    ("settings", "name"),
    [
        ({"DOWNLOAD_DELAY": -1}, "DOWNLOAD_DELAY"),
        ({"POLITENESS_GUARD": "soon"}, "POLITENESS_GUARD"),
        ({"HOST_DOWNLOAD_DELAYS": {"a.example": "slow"}}, "HOST_DOWNLOAD_DELAYS"),
        ({"HOST_DOWNLOAD_DELAYS": {"a.example": -2}}, "HOST_DOWNLOAD_DELAYS"),
    ],
)
def test_bad_delays_are_refused_with_the_setting_named(settings, name):
    with pytest.raises(ConfigError, match=f"^{name}="):
        politeness(**settings)


def test_retry_after_in_seconds_or_as_a_date():
    now = datetime(2026, 11, 24, 12, 0, 0, tzinfo=UTC)
    assert retry_after_seconds(b"120") == 120.0
    assert retry_after_seconds(b"Tue, 24 Nov 2026 12:00:30 GMT", now) == 30.0
    assert retry_after_seconds(b"Tue, 24 Nov 2026 11:00:00 GMT", now) == 0.0
    assert retry_after_seconds(b"soon") is None and retry_after_seconds(None) is None


def test_the_gate_grants_one_send_per_delay_on_the_scripts_clock(redis_url, r):
    async def main() -> None:
        crawler = project_crawler(
            DistributedSpider,
            {"REDIS_URL": redis_url, "DOWNLOAD_DELAY": 0.2, "POLITENESS_GUARD": 0},
        )
        turns = HostTurns.of(crawler)
        turns.redis.clock.set(T0)
        try:
            assert await turns.wait("http://a.example/1") < 0.05  # the first send goes at once
            second = asyncio.create_task(turns.wait("http://a.example/2"))
            await asyncio.sleep(0.05)
            assert not second.done(), "the next send waits for the host's turn"
            assert r.get(K.host_turn("a.example")) == str(T0).encode()
            turns.redis.clock.advance(200)
            assert await asyncio.wait_for(second, 5) >= 0.05
            assert r.get(K.host_turn("a.example")) == str(T0 + 200).encode()
            # Another host has a turn of its own.
            assert await turns.wait("http://b.example/1") < 0.05
        finally:
            await turns.redis.client.aclose()

    asyncio.run(main())


def test_retry_after_pauses_the_host_for_the_cluster(redis_url, r):
    async def main() -> None:
        crawler = project_crawler(
            DistributedSpider, {"REDIS_URL": redis_url, "RETRY_AFTER_MAX": 60}
        )
        middleware = SitePacingMiddleware.from_crawler(crawler)
        middleware.redis.clock.set(T0)
        r.zadd(K.hosts, {"a.example": T0, "b.example": T0})
        for url, status, header in (
            ("http://a.example/1", 429, b"30"),
            ("http://b.example/1", 503, b"3600"),  # capped at RETRY_AFTER_MAX
        ):
            request = Request(url)
            response = Response(url, status=status, headers={"Retry-After": header})
            assert middleware.process_response(request, response) is response
        await middleware.redis.batcher.flush()
        await middleware.redis.client.aclose()

    asyncio.run(main())
    assert r.zscore(K.hosts, "a.example") == T0 + 30_000
    assert r.zscore(K.hosts, "b.example") == T0 + 60_000
