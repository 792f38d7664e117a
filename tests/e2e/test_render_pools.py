"""Separate pools (WORKER_ROLE): an HTTP worker and a render worker share one
crawl of a site with plain and JavaScript pages; real workers, Chromium,
db_writer and Redis."""

from __future__ import annotations

import json

import pytest

from spiders_project.keys import RENDER
from tests.e2e.test_rendering_crawl import BLOCK_TEST_TRACKER, browser_processes, finish, stored
from tests.support.processes import (
    K,
    db_writer,
    published_stats,
    scrapy_command,
    stat,
    wait_until,
    worker,
)
from tests.support.site import JsSite

pytestmark = pytest.mark.slow
RK = K.in_lane(RENDER)


def crawlstatus(redis_url: str) -> str:
    done = scrapy_command(redis_url, "crawlstatus", "--once")
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_an_http_pool_and_a_render_pool_share_a_crawl(redis_url, r, tmp_path, procs):
    db_path = tmp_path / "items.db"
    with JsSite(pages=12, plain_pages=6, slow_pages=0) as site:
        r.lpush(
            K.start_urls,
            json.dumps({"url": site.url, "meta": {"playwright": True}}),
            site.page_url(0, "plain"),
        )
        idle = "MAX_IDLE_TIME_BEFORE_CLOSE=3"
        http = worker("http", redis_url, tmp_path, idle, "WORKER_ROLE=http", BLOCK_TEST_TRACKER)
        writer = db_writer("dbw", redis_url, f"sqlite:///{db_path}", tmp_path)
        procs += [http, writer]

        # Without a render worker: the plain pages are crawled, the rendering
        # seed waits in the render queue, seen by crawlstatus; nothing renders.
        wait_until(
            lambda: site.plain_urls() <= set(stored(db_path)), 90, what="the plain pages stored"
        )
        assert int(r.get(RK.requests_size)) == 1
        assert "| render 1 |" in crawlstatus(redis_url)
        assert http.alive(), "the HTTP worker closed while render work was queued"
        assert browser_processes(http.pid) == []
        assert site.count("/api/page/") == 0 and site.count("/page/") == 0

        # The render worker starts: it takes the render queue, and the crawl ends.
        render = worker(
            "render", redis_url, tmp_path, idle, "WORKER_ROLE=render", BLOCK_TEST_TRACKER
        )
        procs.append(render)
        wait_until(lambda: browser_processes(render.pid), 60, what="the render worker's browser")
        finish(r, writer, [http, render])
        items = stored(db_path)

        assert set(items) == site.js_urls() | site.plain_urls()
        for n in range(12):
            assert site.hits()[("127.0.0.1", f"/api/page/{n}")] == 1  # rendered once
            page = items[site.page_url(n)]
            assert (page["title"], page["rendered"]) == (f"JS page {n}", True)
        for n in range(6):
            plain = items[site.page_url(n, "plain")]
            assert (plain["title"], plain["rendered"]) == (f"Plain {n}", False)
    # Each pool leased only its own queue.
    assert stat(r, http, "scheduler/dequeued/redis") == 6
    assert stat(r, http, "render/requests") == 0
    assert stat(r, http, "render/handed_to_render_pool") == 0
    assert stat(r, render, "scheduler/dequeued/redis") == 12
    assert stat(r, render, "render/requests") == 12
    assert "playwright/page_count" not in published_stats(r, http)
    assert r.get(RK.requests_size) in (None, b"0") and r.zcard(RK.leases) == 0
    for proc in (http, render):
        assert "Traceback" not in proc.log()
