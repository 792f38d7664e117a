"""FRONTIER_SEEN_CACHE never outlives what Redis knows.

Redis is restarted from an older snapshot mid-crawl, as after an
``appendfsync everysec`` crash or a failover to a replica that lagged: it
forgets fingerprints, queued requests and leases it had acknowledged. The
workers must notice (reconnect, new run_id), forget their seen-caches, and the
crawl must still store every page.
"""

from __future__ import annotations

import socket

import pytest
import redis

from tests.support.processes import K, db_writer, items_in_hand, stored_urls, wait_until, worker
from tests.support.site import TestSite

pytestmark = pytest.mark.slow


@pytest.fixture
def snapshot_redis(start_redis):
    """A redis-server that keeps only the snapshots the test asks for (SAVE)."""
    return start_redis()


def test_a_redis_that_lost_writes_loses_no_links(snapshot_redis, tmp_path, procs):
    executor, url = snapshot_redis
    r = redis.Redis.from_url(url)
    db_path = tmp_path / "items.db"
    settings = ("FRONTIER_LEASE_TIMEOUT=3", "CONCURRENT_REQUESTS=8", "MAX_IDLE_TIME_BEFORE_CLOSE=4")
    with TestSite(pages=800, seed=31, latency=0.03) as site:
        r.lpush(K.start_urls, site.url)
        workers = [worker(f"w{i}", url, tmp_path, *settings) for i in (1, 2)]
        writer = db_writer("dbw", url, f"sqlite:///{db_path}", tmp_path)
        procs += [*workers, writer]

        def progress() -> int:
            return r.llen(K.items) + len(stored_urls(db_path))

        wait_until(lambda: progress() > 150, 120, what="a fifth of the crawl")
        r.save()  # the state Redis will come back with
        at_snapshot = progress()
        wait_until(lambda: progress() > at_snapshot + 200, 120, what="crawling past the snapshot")
        run_id = r.info("server")["run_id"]
        try:
            r.shutdown(nosave=True)
        except redis.ConnectionError:
            pass
        executor.stop()
        executor.start()
        assert r.info("server")["run_id"] != run_id
        for w in workers:
            assert w.wait(300) == 0, w.log()[-3000:]
        wait_until(lambda: r.llen(K.items) == 0 and items_in_hand(r) == 0, 60)
        assert writer.stop(30) == 0
        assert sorted(stored_urls(db_path)) == sorted(site.page_urls())
    for w in workers:
        stats = r.hgetall(K.worker_stats(f"{socket.gethostname()}:{w.pid}"))
        assert int(stats.get(b"frontier/seen_cache_cleared", 0)) >= 1, w.name
        assert "Traceback" not in w.log()
    assert r.zcard(K.leases) == 0 and int(r.get(K.requests_size) or 0) == 0
