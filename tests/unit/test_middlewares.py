"""Retry-After: read in seconds or as a date, it pauses the host for the cluster.

The middleware is politeness/middlewares.py. Its pause script runs at a time
the test sets (``ScriptClock``), never by sleeping.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest
from scrapy import Request
from scrapy.http import Response

from spiders_project.plumbing.clock import RedisTime
from spiders_project.politeness.middlewares import (
    SitePacingMiddleware,
    retry_after_seconds,
    site_now,
)
from spiders_project.spiders.distributed import DistributedSpider
from tests.support.crawlers import project_crawler
from tests.support.processes import K

T0 = 1_700_000_000_000  # the scripts' clock at the start (ms since the epoch)


def test_retry_after_in_seconds_or_as_a_date():
    now = datetime(2026, 11, 24, 12, 0, 0, tzinfo=UTC)
    assert retry_after_seconds(b"120") == 120.0
    assert retry_after_seconds(b"Tue, 24 Nov 2026 12:00:30 GMT", now) == 30.0
    assert retry_after_seconds(b"Tue, 24 Nov 2026 11:00:00 GMT", now) == 0.0
    assert retry_after_seconds(b"soon") is None and retry_after_seconds(None) is None


@pytest.mark.redis
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


def test_a_retry_after_date_counts_from_the_sites_date_not_this_nodes_clock():
    """A node whose clock is an hour ahead would take every Retry-After date
    for the past (no pause); the site's own Date header wrote that date."""
    clock = RedisTime(lambda: 7_200.0)  # this node: an hour ahead, Redis never asked
    response = Response(
        "http://a.example/",
        status=503,
        headers={
            "Date": "Tue, 24 Nov 2026 12:00:00 GMT",
            "Retry-After": "Tue, 24 Nov 2026 12:00:30 GMT",
        },
    )
    now = site_now(response, clock)
    assert now == datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
    assert retry_after_seconds(response.headers[b"Retry-After"], now) == 30.0
    # Without a Date header: Redis' clock, as this node measured it.
    clock.observe(3_600.0, 7_200.0, 7_200.0)
    assert site_now(Response("http://a.example/", status=503), clock) == datetime.fromtimestamp(
        3_600.0, UTC
    )
