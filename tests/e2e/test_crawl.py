"""Whole crawls: real workers (``scrapy crawl distributed``), real db_writer, real Redis."""

from __future__ import annotations

import json
import signal
from urllib.parse import urlsplit

import pytest
import redis
from pytest_redis import factories

from tests.support.processes import (
    K,
    db_writer,
    items_drained,
    stat,
    stored_urls,
    wait_until,
    worker,
)
from tests.support.site import TestSite

pytestmark = pytest.mark.slow


def test_two_workers_and_db_writer_store_every_page_once(redis_url, r, tmp_path, procs):
    db_path = tmp_path / "items.db"
    with TestSite(pages=1200, seed=2, flaky_every=40) as site:
        r.lpush(K.start_urls, site.url)
        workers = [
            worker(f"w{i}", redis_url, tmp_path, "MAX_IDLE_TIME_BEFORE_CLOSE=3") for i in (1, 2)
        ]
        writer = db_writer("dbw", redis_url, f"sqlite:///{db_path}", tmp_path)
        procs += [*workers, writer]
        for w in workers:
            assert w.wait(240) == 0, w.log()[-3000:]
        wait_until(lambda: items_drained(r), 60, what="the item buffer to drain")
        assert writer.stop(30) == 0, writer.log()[-3000:]

        urls = stored_urls(db_path)
        assert len(urls) == len(set(urls))
        assert set(urls) == site.page_urls()
        assert len(urls) >= 1200
        # Every page fetched successfully exactly once across both workers.
        hits = site.hits()
        assert {u: n for u, n in hits.items() if n != 1} == {}
        # Nothing off-site, and nothing but our own host:port was asked for.
        assert site.offsite_requests() == []
        own = urlsplit(site.url).netloc
        assert {host for _, host, _, _ in site.request_log()} == {own}
    logs = [w.log() for w in workers]
    # Both workers did real work, and together scraped each page once.
    items = [stat(r, w, "item_scraped_count") for w in workers]
    assert all(n > 0 for n in items) and sum(items) == len(urls), items
    for log in logs + [writer.log()]:
        assert "Deprecat" not in log
        assert "Traceback" not in log
    # Shared crawl state persisted for the next run: nothing flushed on close.
    assert int(r.get(K.seen) or 0) >= len(urls)
    assert r.zcard(K.leases) == 0 and int(r.get(K.requests_size) or 0) == 0


def test_bad_seeds_are_rejected_and_the_worker_keeps_crawling(redis_url, r, tmp_path, procs):
    bad = [b"not a url", b"ftp://example.com/", b'{"url": ', b'{"meta": {}}', b"\xff\xfe"]
    with TestSite(pages=30, seed=3, dead_links=False, offsite_links=False) as site:
        r.lpush(K.start_urls, *bad[:3], site.url, *bad[3:])
        w = worker("w", redis_url, tmp_path, "MAX_IDLE_TIME_BEFORE_CLOSE=2")
        procs.append(w)
        assert w.wait(120) == 0, w.log()[-3000:]
        assert set(r.lrange(K.start_urls_rejected, 0, -1)) == set(bad)
        assert stat(r, w, "seeds/rejected") == len(bad)
        assert stat(r, w, "item_scraped_count") == len(site.page_urls())
        assert r.llen(K.items) == len(site.page_urls())


def test_json_seed_with_meta_and_seeds_read_while_busy(redis_url, r, tmp_path, procs):
    """A second seed pushed mid-crawl is crawled side by side, not after the first."""
    with TestSite(pages=400, seed=4, latency=0.02, hosts=2) as site:
        first, second = site.urls
        r.lpush(K.start_urls, first)
        w = worker(
            "w", redis_url, tmp_path, "MAX_IDLE_TIME_BEFORE_CLOSE=3", "CONCURRENT_REQUESTS=8"
        )
        procs.append(w)
        wait_until(lambda: r.llen(K.items) > 20, 60, what="the first site to be crawling")
        r.lpush(K.start_urls, f'{{"url": "{second}", "meta": {{"tag": "s2"}}, "priority": 3}}')
        assert w.wait(240) == 0, w.log()[-3000:]
        netloc2 = urlsplit(second).netloc
        times1 = [t for t, host, _, _ in site.request_log() if host != netloc2]
        times2 = [t for t, host, _, _ in site.request_log() if host == netloc2]
        assert times2 and times1
        # The second site started while the first was still being crawled.
        assert min(times2) < max(times1) - 1.0
        assert r.llen(K.items) == len(site.page_urls())


def test_worker_and_db_writer_exit_with_one_line_when_redis_is_unreachable(tmp_path, procs):
    url = "redis://:s3cret@127.0.0.1:9/0"
    w = worker("w", url, tmp_path)
    d = db_writer("d", url, f"sqlite:///{tmp_path}/x.db", tmp_path)
    procs += [w, d]
    for p in (w, d):
        assert p.wait(60) != 0
        log = p.log()
        assert "s3cret" not in log and "Traceback" not in log
        lines = [line for line in log.splitlines() if "redis://:***@127.0.0.1:9/0" in line]
        assert len(lines) == 1, log


def test_sigterm_returns_unfinished_work(redis_url, r, tmp_path, procs):
    with TestSite(pages=300, seed=5, latency=0.05) as site:
        r.lpush(K.start_urls, site.url)
        w = worker("w", redis_url, tmp_path, "CONCURRENT_REQUESTS=8")
        procs.append(w)
        wait_until(lambda: r.llen(K.items) > 30, 60, what="crawl progress")
        w.signal(signal.SIGTERM)
        assert w.wait(60) == 0, w.log()[-3000:]
        assert r.zcard(K.leases) == 0
        assert int(r.get(K.requests_size) or 0) > 0
        # A second worker finishes the crawl; nothing was lost.
        w2 = worker("w2", redis_url, tmp_path, "MAX_IDLE_TIME_BEFORE_CLOSE=2")
        procs.append(w2)
        assert w2.wait(120) == 0, w2.log()[-3000:]
        urls = [x.decode() for x in r.lrange(K.items, 0, -1)]
        stored = {json.loads(u)["url"] for u in urls}
        assert stored == site.page_urls()


redis_with_password = factories.redis_proc(port=None, password="s3cret pw")


def test_depth_limit_and_a_password_protected_redis(redis_with_password, tmp_path, procs):
    from urllib.parse import quote

    url = f"redis://:{quote('s3cret pw')}@{redis_with_password.host}:{redis_with_password.port}/0"
    r = redis.Redis.from_url(url)
    r.flushall()  # our own private server
    with TestSite(pages=200, seed=6, offsite_links=False) as site:
        r.lpush(K.start_urls, site.url)
        w = worker("w", url, tmp_path, "DEPTH_LIMIT=1", "MAX_IDLE_TIME_BEFORE_CLOSE=2")
        procs.append(w)
        assert w.wait(120) == 0, w.log()[-3000:]
        items = [json.loads(x)["item"] for x in r.lrange(K.items, 0, -1)]
    assert "s3cret" not in w.log()
    depths = {item["depth"] for item in items}
    assert depths == {0, 1}
    assert 1 < len(items) < len(site.page_urls())
    r.close()
