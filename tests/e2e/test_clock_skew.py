"""A worker whose clock is an hour off crawls correctly (issue 26, item 5),
on the namespace test bed: Redis, the site and each process on a host of its own.

libfaketime (Debian's ``faketime`` package) moves one worker's clock an hour
ahead, wall clock and monotonic alike, as a node with a wrong clock would
have. Leases, heartbeats, stats samples, turns, seed budgets, robots.txt
TTLs and recrawl times (RECRAWL_AFTER) are timed by Redis' clock; what the
worker stamps itself (an item's ``scraped_at``, which decides the newer of
two rows, and its ``fetched_at``) follows Redis' clock through ``RedisTime``.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from spiders_project.read_model.contract import LAST_SEEN_FIELD
from tests.support.netns import NetnsBed
from tests.support.processes import (
    K,
    Proc,
    db_writer,
    items_drained,
    published_stats,
    stat,
    stored_urls,
    wait_until,
    worker,
)
from tests.support.services import RedisServer
from tests.support.site import TestSite

pytestmark = pytest.mark.slow

# Debian's faketime package (make setup installs it), for this machine's architecture.
(LIBFAKETIME,) = Path("/usr/lib").glob("*/faketime/libfaketime.so.1")
AN_HOUR_AHEAD = {"LD_PRELOAD": str(LIBFAKETIME), "FAKETIME": "+1h", "FAKETIME_NO_CACHE": "1"}


def test_libfaketime_moves_a_childs_clock(tmp_path):
    """The test below means something only if the worker's clock really is off."""
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-c", "import time; print(time.time())"],
        env=AN_HOUR_AHEAD,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert float(out) - time.time() == pytest.approx(3600, abs=30)


@pytest.fixture
def bed() -> Iterator[NetnsBed]:
    with NetnsBed(["redis", "site", "normal", "ahead", "writer"]) as made:
        yield made


def test_a_worker_an_hour_ahead_crawls_on_redis_clock(bed, tmp_path, procs):
    """On hosts of their own (tests/support/netns.py): Redis, the site, the
    db_writer, a worker with the right time and one an hour ahead."""
    db_path = tmp_path / "items.db"
    server = RedisServer(host=bed.address("redis"), prefix=bed.prefix("redis"))
    redis_url, r = server.url, server.client
    with bed.inside("site"):
        site = TestSite(pages=300, seed=7, host=bed.address("site"))
        site.start()
    try:
        # A budget the cluster counts in Redis: exactly 200 pages of the 300.
        r.lpush(K.start_urls, json.dumps({"url": site.url, "max_pages": 200}))
        # RECRAWL_AFTER: a URL is due again 10 minutes after it was queued, on
        # Redis' clock; on the worker's own, an hour on, every link it finds
        # to a page already crawled would be due and fetched again.
        settings = ("MAX_IDLE_TIME_BEFORE_CLOSE=3", "FRONTIER_LEASE_TIMEOUT=6", "RECRAWL_AFTER=600")
        normal = worker("normal", redis_url, tmp_path, *settings, prefix=bed.prefix("normal"))
        ahead = worker(
            "ahead", redis_url, tmp_path, *settings, env=AN_HOUR_AHEAD, prefix=bed.prefix("ahead")
        )
        writer = db_writer(
            "dbw", redis_url, f"sqlite:///{db_path}", tmp_path, prefix=bed.prefix("writer")
        )
        procs += [normal, ahead, writer]
        crawled_on_redis_clock(r, site, normal, ahead, writer, db_path)
    finally:
        site.stop()
        for p in procs:
            p.close()
        server.stop()


def crawled_on_redis_clock(
    r: redis.Redis, site: TestSite, normal: Proc, ahead: Proc, writer: Proc, db_path: Path
) -> None:
    """The crawl's witnesses: the site's log, the rows, the workers' stats and logs."""
    # While it crawls, its heartbeat is stamped with Redis' clock.
    wait_until(lambda: stat(r, ahead, "item_scraped_count") > 0, 60, what="a first item")
    redis_now = float(r.time()[0])
    last_seen = float(published_stats(r, ahead)[LAST_SEEN_FIELD])
    assert abs(last_seen - redis_now) < 30

    for w in (normal, ahead):
        assert w.wait(120) == 0, w.log()[-3000:]
    wait_until(lambda: items_drained(r), 60, what="the item buffer to drain")
    assert writer.stop(30) == 0, writer.log()[-3000:]

    urls = stored_urls(db_path)
    hits = site.hits()
    assert {u: n for u, n in hits.items() if n != 1} == {}  # nothing fetched twice
    # The budget is exact: 200 fetches (pages and dead links), robots.txt aside.
    fetched = [t for _, _, t, _ in site.request_log() if t != "/robots.txt"]
    assert len(fetched) == 200, len(fetched)
    # robots.txt once for the cluster: its TTL is Redis' (a key's PX, and
    # the rest of it as a duration in each worker's cache).
    assert [t for _, _, t, _ in site.request_log() if t == "/robots.txt"] == ["/robots.txt"]
    # Every page fetched is stored once.
    assert len(urls) == len(set(urls))
    assert set(urls) == set(hits) & site.page_urls()

    # Both did real work; no lease of the worker ahead looked expired to anyone.
    assert stat(r, ahead, "item_scraped_count") > 0 and stat(r, normal, "item_scraped_count") > 0
    for w in (normal, ahead):
        assert stat(r, w, "frontier/leases_reclaimed") == 0
    assert "clock is +3600" in ahead.log() or "clock is +3599" in ahead.log()
    # Every row is stamped within the crawl's minutes on Redis' clock, not an hour on.
    with sqlite3.connect(db_path) as db:
        rows = db.execute("SELECT scraped_at, data FROM items").fetchall()
    times = [_epoch(scraped_at) for scraped_at, _ in rows]
    fetched = [_epoch(json.loads(data)["fetched_at"]) for _, data in rows]
    for stamp in times + fetched:
        assert abs(stamp - redis_now) < 300, (stamp, redis_now)
    for w in (normal, ahead):
        assert "Traceback" not in w.log()


def _epoch(iso: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()
