"""Faults a real cluster meets, with real processes: nothing may be lost."""

from __future__ import annotations

import json
import os
import pickle
import re
import signal
import socket
import time
from urllib.parse import urlsplit

import pytest
import redis

from tests.support.processes import (
    K,
    db_writer,
    items_drained,
    published_stats,
    stat,
    stored_urls,
    wait_until,
    worker,
)
from tests.support.site import TestSite
from tests.support.wild import spacing_faults

pytestmark = pytest.mark.slow


def test_sigkill_of_a_worker_loses_nothing(redis_url, r, tmp_path, procs):
    db_path = tmp_path / "items.db"
    # The site's one host may have both workers' 16 requests in flight at once
    # (the cap is cluster-wide), so the victim always holds leases.
    settings = (
        "FRONTIER_LEASE_TIMEOUT=3",
        "CONCURRENT_REQUESTS=16",
        "CONCURRENT_REQUESTS_PER_DOMAIN=32",
    )
    with TestSite(pages=1100, seed=11, latency=0.05) as site:
        r.lpush(K.start_urls, site.url)
        victim = worker("victim", redis_url, tmp_path, *settings)
        survivor = worker(
            "survivor", redis_url, tmp_path, *settings, "MAX_IDLE_TIME_BEFORE_CLOSE=4"
        )
        writer = db_writer("dbw", redis_url, f"sqlite:///{db_path}", tmp_path)
        procs += [victim, survivor, writer]
        wait_until(
            lambda: r.llen(K.items) + len(stored_urls(db_path)) > 330, 120, what="30% of the crawl"
        )
        # Killed while it holds leases (a worker between two lease calls holds none).
        mine = f"{socket.gethostname()}:{victim.pid}:".encode()
        wait_until(
            lambda: any(m.startswith(mine) for m in r.zrange(K.leases, 0, -1)),
            60,
            interval=0.01,
            what="the victim to hold leases",
        )
        held = r.zcard(K.leases)
        victim.signal(signal.SIGKILL)
        assert victim.wait(10) == -signal.SIGKILL
        assert survivor.wait(300) == 0, survivor.log()[-3000:]
        wait_until(lambda: items_drained(r), 60, what="the item buffer to drain")
        assert writer.stop(30) == 0
        urls = stored_urls(db_path)
        assert sorted(urls) == sorted(site.page_urls())
        refetched = {u for u, n in site.hits().items() if n > 1}
    reclaimed = stat(r, survivor, "frontier/leases_reclaimed")
    # Leases in Redis at the kill: both workers' (at most CONCURRENT_REQUESTS
    # each) plus acks still in a write buffer (at most one flush interval).
    assert 0 < reclaimed <= held
    # The only pages fetched twice are the leases the killed worker held.
    assert len(refetched) <= reclaimed, (refetched, reclaimed)


@pytest.fixture
def aof_redis(start_redis):
    """A redis-server with appendonly persistence that the test can restart."""
    return start_redis("--appendonly", "yes", "--appendfsync", "always")


def test_redis_restart_mid_crawl(aof_redis, tmp_path, procs):
    executor, url = aof_redis
    r = redis.Redis.from_url(url)
    db_path = tmp_path / "items.db"
    settings = ("FRONTIER_LEASE_TIMEOUT=5", "CONCURRENT_REQUESTS=8", "MAX_IDLE_TIME_BEFORE_CLOSE=4")
    with TestSite(pages=600, seed=12, latency=0.03) as site:
        r.lpush(K.start_urls, site.url)
        workers = [worker(f"w{i}", url, tmp_path, *settings) for i in (1, 2)]
        writer = db_writer("dbw", url, f"sqlite:///{db_path}", tmp_path)
        procs += [*workers, writer]
        wait_until(
            lambda: r.llen(K.items) + len(stored_urls(db_path)) > 150,
            120,
            what="a quarter of the crawl",
        )
        executor.stop()
        time.sleep(4)
        executor.start()
        for w in workers:
            assert w.wait(300) == 0, w.log()[-3000:]
        wait_until(lambda: items_drained(r), 60, what="the item buffer to drain")
        assert writer.stop(30) == 0
        assert sorted(stored_urls(db_path)) == sorted(site.page_urls())
    for p in [*workers, writer]:
        log = p.log()
        assert "reconnecting" in log, p.name
        assert "reconnected" in log.lower(), p.name
        assert "Traceback" not in log, p.name
    r.close()


def test_hostile_queue_content_is_rejected_never_executed(redis_url, r, tmp_path, procs):
    marker = tmp_path / "pwned"

    class Exploit:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    with TestSite(pages=40, seed=13, dead_links=False, offsite_links=False) as site:
        host = urlsplit(site.url).netloc
        hostile = [
            pickle.dumps(Exploit()),
            b"\x00\xffgarbage",
            b'{"url": 42}',
            b'{"url": "http://x/", "_class": "os.system"}',
        ]
        for i, payload in enumerate(hostile):
            r.zadd(K.host_queue(host), {payload: i})
        r.zadd(K.hosts, {host: 0})
        r.incrby(K.requests_size, len(hostile))
        r.lpush(K.start_urls, site.url)
        w = worker("w", redis_url, tmp_path, "MAX_IDLE_TIME_BEFORE_CLOSE=2")
        procs.append(w)
        assert w.wait(120) == 0, w.log()[-3000:]
        assert not marker.exists(), "a pickle from Redis was executed"
        assert set(r.lrange(K.requests_rejected, 0, -1)) == set(hostile)
        assert stat(r, w, "frontier/rejected") == len(hostile)
        items = {json.loads(x)["url"] for x in r.lrange(K.items, 0, -1)}
        assert items == site.page_urls()
        assert r.zcard(K.leases) == 0 and int(r.get(K.requests_size)) == 0


def test_politeness_holds_across_three_workers(redis_url, r, tmp_path, procs):
    with TestSite(
        pages=25, seed=14, hosts=2, dead_links=False, offsite_links=False, latency=0.01
    ) as slow_and_fast:
        slow, fast = (urlsplit(u).netloc for u in slow_and_fast.urls)
        delays = json.dumps({slow: 0.2})
        r.lpush(K.start_urls, *slow_and_fast.urls)
        workers = [
            worker(
                f"w{i}",
                redis_url,
                tmp_path,
                f"HOST_DOWNLOAD_DELAYS={delays}",
                "MAX_IDLE_TIME_BEFORE_CLOSE=2",
                # Both hosts start at once: no robots.txt fetch takes the slow host's first turn.
                "ROBOTSTXT_OBEY=false",
            )
            for i in (1, 2, 3)
        ]
        procs += workers
        for w in workers:
            assert w.wait(120) == 0, w.log()[-3000:]
        log = slow_and_fast.request_log()
    slow_times = sorted(t for t, h, path, _ in log if h == slow and path != "/robots.txt")
    fast_times = sorted(t for t, h, path, _ in log if h == fast)
    gaps = [b - a for a, b in zip(slow_times, slow_times[1:], strict=False)]
    assert len(slow_times) >= 25
    assert not spacing_faults(slow_times, 0.2, slack=0), gaps
    # The other host was crawled in parallel, inside the slow host's window.
    during = [t for t in fast_times if slow_times[0] < t < slow_times[-1]]
    assert len(during) >= 20
    fast_gaps = [b - a for a, b in zip(during, during[1:], strict=False)]
    assert min(fast_gaps) < 0.05


def test_backpressure_pauses_fetching_until_the_buffer_drains(redis_url, r, tmp_path, procs):
    db_path = tmp_path / "items.db"
    limit = 40
    with TestSite(pages=300, seed=15, latency=0.005) as site:
        r.lpush(K.start_urls, site.url)
        w = worker(
            "w",
            redis_url,
            tmp_path,
            f"ITEM_BUFFER_MAX={limit}",
            "CONCURRENT_REQUESTS=8",
            "MAX_IDLE_TIME_BEFORE_CLOSE=3",
            "STATS_PUBLISH_INTERVAL=0.5",
        )
        procs.append(w)
        wait_until(lambda: "pausing fetching" in w.log(), 60, what="backpressure")
        # Paused: the buffer stays bounded while nothing drains it.
        peak = 0
        for _ in range(20):
            peak = max(peak, r.llen(K.items))
            time.sleep(0.1)
        assert limit < peak <= limit + 2 * 8 + 16, peak
        hits_while_paused = sum(site.hits().values())
        since = time.time()
        # A second more, and the worker lived through it: it published its stats
        # after it. It fetched at most what it had in flight.
        wait_until(
            lambda: float(published_stats(r, w).get("_last_seen", 0)) > since + 1.0,
            10,
            what="the worker to publish a second into the pause",
        )
        assert sum(site.hits().values()) - hits_while_paused <= 8
        writer = db_writer("dbw", redis_url, f"sqlite:///{db_path}", tmp_path)
        procs.append(writer)
        assert w.wait(120) == 0, w.log()[-3000:]
        wait_until(lambda: items_drained(r), 60, what="the item buffer to drain")
        assert writer.stop(30) == 0
        assert sorted(stored_urls(db_path)) == sorted(site.page_urls())
    assert "resuming fetching" in w.log()


def test_sigterm_drains_within_the_grace_period_and_hands_back(redis_url, r, tmp_path, procs):
    with TestSite(pages=60, seed=16, latency=4.0) as site:
        r.lpush(K.start_urls, site.url)
        w = worker("w", redis_url, tmp_path, "SHUTDOWN_GRACE_PERIOD=1", "CONCURRENT_REQUESTS=4")
        procs.append(w)
        # The root page has been crawled and its links are being fetched (slowly).
        wait_until(
            lambda: r.llen(K.items) >= 1 and r.zcard(K.leases) >= 2, 60, what="requests in flight"
        )
        started = time.monotonic()
        w.signal(signal.SIGTERM)
        assert w.wait(30) == 0, w.log()[-3000:]
        assert time.monotonic() - started < 10
        log = w.log()
        assert "Draining: finishing" in log
        assert re.search(r"Grace period over: handing back [1-9]\d* unfinished requests", log)
        assert r.zcard(K.leases) == 0
        assert int(r.get(K.requests_size)) >= 2


def test_retry_after_pauses_the_host_for_the_whole_cluster(redis_url, r, tmp_path, procs):
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    log: list[tuple[float, str, int]] = []
    throttled = {"done": False}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's naming
            if self.path == "/":
                body = "".join(f'<a href="/p/{i}">{i}</a>' for i in range(30)).encode()
                status = 200
            elif self.path == "/p/5" and not throttled["done"]:
                throttled["done"] = True
                body, status = b"slow down", 429
            else:
                body, status = b"<html><title>p</title></html>", 200
            log.append((time.monotonic(), self.path, status))
            self.send_response(status)
            if status == 429:
                self.send_header("Retry-After", "2")
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        r.lpush(K.start_urls, f"http://127.0.0.1:{server.server_port}/")
        workers = [
            worker(
                f"w{i}",
                redis_url,
                tmp_path,
                "CONCURRENT_REQUESTS=2",
                "DOWNLOAD_DELAY=0.05",
                "MAX_IDLE_TIME_BEFORE_CLOSE=3",
            )
            for i in (1, 2)
        ]
        procs += workers
        for w in workers:
            assert w.wait(120) == 0, w.log()[-3000:]
    finally:
        server.shutdown()
    t429 = next(t for t, _, status in log if status == 429)
    after = sorted(t for t, _, status in log if t > t429)
    assert after, "the crawl went on after the pause"
    # The requests whose turn came before the pause reached Redis may still
    # land (spaced DOWNLOAD_DELAY + POLITENESS_GUARD = 0.08 s apart: a CI run
    # saw the 4th at 0.32 s); nothing new for 2 s after that.
    starts = [t for t in after if t - t429 > 0.5]
    assert not starts or min(starts) - t429 >= 1.9, [round(t - t429, 2) for t in after[:8]]
    assert {p for _, p, s in log if s == 200} >= {f"/p/{i}" for i in range(30)}
