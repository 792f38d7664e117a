"""Redis answering, but not as hoped: OOM, READONLY, bad entries, doubled seeds, a frozen worker.

Issue 9: an error *reply* (OOM under ``maxmemory`` + ``noeviction``, READONLY
after a failover or ``REPLICAOF``), a bad entry in a frontier key, a seed
pushed several times, or a worker that stalls past its lease timeout must
stall the crawl at most, never lose a page, end a process or leave the
frontier's counters wrong. Real processes, a redis-server of each test's own
(so the test may reconfigure it), the local TestSite, and assertions on the
exact set of pages stored.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import redis
from port_for import get_port
from redis.exceptions import OutOfMemoryError, ReadOnlyError

from spiders_project.keys.db_writers import writers
from tests.support.processes import (
    K,
    Proc,
    db_writer,
    items_drained,
    items_in_hand,
    stat,
    stored_urls,
    wait_until,
    worker,
)
from tests.support.site import TestSite

pytestmark = pytest.mark.slow

# How long Redis refuses writes in the OOM and READONLY tests, in seconds:
# longer than the first four backoff steps (0.2 + 0.4 + 0.8 + 1.6 s), so every
# process meets the refusal several times, and shorter than any TTL (the
# db_writer lock lives 10 s, leases 30 s by default).
REFUSAL_WINDOW = 5.0
# maxmemory is set this far below used_memory: more than the db_writer can free
# by draining the item buffer while Redis refuses writes (a few hundred items of
# about 400 bytes), so Redis keeps answering OOM for the whole window.
OOM_MARGIN = 512 * 1024
REFUSES = "Redis refuses writes"
ACCEPTS = "Redis accepts writes again"


@pytest.fixture
def own_redis(start_redis) -> Iterator[tuple[str, redis.Redis]]:
    """A redis-server of this test alone (noeviction, no persistence) and a client of it.

    The test reconfigures it (``maxmemory``, ``REPLICAOF``), which it must
    never do to a Redis it did not start.
    """
    _, url = start_redis("--maxmemory-policy", "noeviction")
    client = redis.Redis.from_url(url)
    yield url, client
    client.close()


def progress(r: redis.Redis, db_path: Path) -> int:
    """Pages scraped so far: in the item buffer or already in the database."""
    return r.llen(K.items) + items_in_hand(r) + len(stored_urls(db_path))


def queued_in_host_queues(r: redis.Redis) -> int:
    """Requests really in the host queues (SCAN: fine in a test, never in the product)."""
    return sum(r.zcard(key) for key in r.scan_iter(match=K.host_queue("*"), count=1000)) + sum(
        r.llen(key) for key in r.scan_iter(match=K.host_list("*"), count=1000)
    )


def exit_status(p: Proc, r: redis.Redis, timeout: float) -> int:
    """``p``'s exit status; a process still up after ``timeout`` fails with the frontier's state.

    A worker that never closes means the cluster never looked idle: a size
    counter that drifted, a lease nobody can end, a queue nobody reads.
    """
    try:
        return p.wait(timeout)
    except subprocess.TimeoutExpired:
        state = (
            f"requests:size={int(r.get(K.requests_size) or 0)}, "
            f"in host queues={queued_in_host_queues(r)}, leases={r.zcard(K.leases)}, "
            f"start_urls={r.llen(K.start_urls)}, hosts={r.zrange(K.hosts, 0, 5)}"
        )
        pytest.fail(f"{p.name} still running after {timeout:.0f} s ({state})\n{p.log()[-3000:]}")


def assert_frontier_empty(r: redis.Redis) -> None:
    """Nothing leased, nothing queued, and the size counter agrees with the queues."""
    assert r.zcard(K.leases) == 0, r.zrange(K.leases, 0, 20, withscores=True)
    assert r.hlen(K.lease_info) == 0, r.hgetall(K.lease_info)
    assert queued_in_host_queues(r) == 0
    assert int(r.get(K.requests_size) or 0) == 0


def row_count(db_path: Path) -> int:
    with sqlite3.connect(db_path) as db:
        return db.execute("SELECT COUNT(*) FROM items").fetchone()[0]


def probe_refused(r: redis.Redis, error: type[Exception]) -> None:
    """Redis really refuses a plain write now (a test precondition, not the product's)."""
    with pytest.raises(error):
        r.set("x", "y")


def assert_clean_logs(procs: list[Proc]) -> None:
    for p in procs:
        assert "Traceback" not in p.log(), (p.name, p.log()[-3000:])


def assert_refusal_logged_once(workers: list[Proc]) -> None:
    """One line when Redis starts refusing writes and one when it takes them again."""
    for w in workers:
        log = w.log()
        assert 1 <= log.count(REFUSES) <= 3, (w.name, log.count(REFUSES), log[-3000:])
        assert 1 <= log.count(ACCEPTS) <= 3, (w.name, log.count(ACCEPTS), log[-3000:])


def crawl_through_refused_writes(
    url: str,
    r: redis.Redis,
    tmp_path: Path,
    procs: list[Proc],
    *,
    seed: int,
    refuse: Callable[[], None],
    accept: Callable[[], None],
    error: type[Exception],
) -> None:
    """2 workers and the db_writer crawl a site while Redis refuses writes for a while.

    ``refuse`` makes Redis refuse writes with ``error`` at a quarter of the
    crawl; ``accept`` undoes it REFUSAL_WINDOW seconds later. Every process
    must live through it, and the crawl must end complete.
    """
    db_path = tmp_path / "items.db"
    pages = 2000
    with TestSite(pages=pages, seed=seed, latency=0.02) as site:
        r.lpush(K.start_urls, site.url)
        workers = [worker(f"w{i}", url, tmp_path, "MAX_IDLE_TIME_BEFORE_CLOSE=4") for i in (1, 2)]
        writer = db_writer("dbw", url, f"sqlite:///{db_path}", tmp_path)
        procs += [*workers, writer]
        wait_until(lambda: progress(r, db_path) > pages // 4, 90, what="a quarter of the crawl")
        refuse()
        probe_refused(r, error)
        started = progress(r, db_path)
        time.sleep(REFUSAL_WINDOW)
        probe_refused(r, error)  # refused for the whole window
        accept()
        r.set("x", "y")
        # Nothing ended while Redis refused writes, and the crawl was not over.
        for p in [*workers, writer]:
            assert p.poll() is None, (p.name, p.poll(), p.log()[-3000:])
        assert started < pages
        for w in workers:
            assert exit_status(w, r, 90) == 0, w.log()[-3000:]
        wait_until(lambda: items_drained(r), 30, what="the item buffer to drain")
        assert writer.stop(30) == 0, writer.log()[-3000:]
        urls = stored_urls(db_path)
        assert sorted(urls) == sorted(site.page_urls())
    assert_frontier_empty(r)
    assert_refusal_logged_once(workers)
    assert_clean_logs([*workers, writer])


def test_oom_stalls_nothing(own_redis, tmp_path, procs):
    url, r = own_redis

    def refuse() -> None:
        used = r.info("memory")["used_memory"]
        r.config_set("maxmemory", max(used - OOM_MARGIN, 1))

    crawl_through_refused_writes(
        url,
        r,
        tmp_path,
        procs,
        seed=91,
        refuse=refuse,
        accept=lambda: r.config_set("maxmemory", 0),
        error=OutOfMemoryError,
    )


def test_db_writer_starts_under_oom(own_redis, tmp_path, procs):
    """The db_writer is the process that frees Redis memory: it must start and drain under OOM."""
    url, r = own_redis
    db_path = tmp_path / "items.db"
    with TestSite(pages=150, seed=92) as site:
        r.lpush(K.start_urls, site.url)
        w = worker("w", url, tmp_path, "MAX_IDLE_TIME_BEFORE_CLOSE=2")
        procs.append(w)
        assert exit_status(w, r, 90) == 0, w.log()[-3000:]
        buffered = {json.loads(x)["url"] for x in r.lrange(K.items, 0, -1)}
        assert buffered == site.page_urls()
        used = r.info("memory")["used_memory"]
        r.config_set("maxmemory", max(used - OOM_MARGIN, 1))
        probe_refused(r, OutOfMemoryError)
        writer = db_writer("dbw", url, f"sqlite:///{db_path}", tmp_path)
        procs.append(writer)
        wait_until(
            lambda: (
                (items_drained(r) and len(stored_urls(db_path)) == len(buffered))
                or writer.poll() is not None
            ),
            60,
            what="the db_writer to drain the buffer under OOM",
        )
        assert writer.poll() is None, writer.log()[-3000:]
        probe_refused(r, OutOfMemoryError)  # it drained while Redis stayed full
        assert r.hlen(writers(K)) == 1  # it joined the writers under OOM
        assert writer.stop(30) == 0, writer.log()[-3000:]
        assert sorted(stored_urls(db_path)) == sorted(site.page_urls())
    r.config_set("maxmemory", 0)
    assert_clean_logs([w, writer])


def test_readonly_stalls_nothing(own_redis, tmp_path, procs):
    url, r = own_redis
    before: dict[str, int] = {}

    def refuse() -> None:
        r.config_set("replica-read-only", "yes")
        # Nothing listens there, so the sync never succeeds and the data stays.
        r.execute_command("REPLICAOF", "127.0.0.1", str(get_port(None)))
        before.update(keys=r.dbsize(), seen=int(r.get(K.seen) or 0))
        assert before["keys"] > 0 and before["seen"] > 0

    def accept() -> None:
        # A replica whose master never answered kept every key.
        assert r.dbsize() == before["keys"]
        assert int(r.get(K.seen) or 0) == before["seen"]
        r.execute_command("REPLICAOF", "NO", "ONE")

    crawl_through_refused_writes(
        url, r, tmp_path, procs, seed=93, refuse=refuse, accept=accept, error=ReadOnlyError
    )


def test_bad_entries_harm_only_themselves(own_redis, tmp_path, procs):
    url, r = own_redis
    db_path = tmp_path / "items.db"
    settings = ("FRONTIER_LEASE_TIMEOUT=3", "MAX_IDLE_TIME_BEFORE_CLOSE=3")
    with TestSite(pages=300, seed=94, latency=0.01) as site:
        host = urlsplit(site.url).netloc
        root = site.url.encode()
        planted = [
            # Request(encoding="nope") raises LookupError.
            json.dumps({"url": site.url + "nope-codec", "encoding": "nope"}).encode(),
            # Request() raises ValueError (an unclosed IPv6 literal).
            json.dumps({"url": "http://[bad"}).encode(),
            # Not UTF-8, so not JSON either.
            b'{"url": "' + root + b'bad-\xff\xfe"}',
            # A callback name the spider must never call.
            json.dumps({"url": site.url + "cb-init", "cb": "__init__"}).encode(),
        ]
        # Small scores: they pop right after the seed, before the site's links.
        for i, entry in enumerate(planted, start=1):
            r.zadd(K.host_queue(host), {entry: i})
        r.incrby(K.requests_size, len(planted))
        r.zadd(K.hosts, {host: 0})
        bad_host = b"\xff\xfe.example"
        r.zadd(K.hosts, {bad_host: 0})
        orphan = b"orphan-lease-without-info"
        r.zadd(K.leases, {orphan: 1})
        r.lpush(K.start_urls, site.url)
        workers = [worker(f"w{i}", url, tmp_path, *settings) for i in (1, 2)]
        writer = db_writer("dbw", url, f"sqlite:///{db_path}", tmp_path)
        procs += [*workers, writer]
        for w in workers:
            assert exit_status(w, r, 90) == 0, w.log()[-3000:]
        wait_until(lambda: items_drained(r), 30, what="the item buffer to drain")
        assert writer.stop(30) == 0, writer.log()[-3000:]
        assert sorted(stored_urls(db_path)) == sorted(site.page_urls())
    rejected = r.lrange(K.requests_rejected, 0, -1)
    for entry in planted:
        assert rejected.count(entry) == 1, (entry, rejected)
    assert rejected.count(b"host " + bad_host) == 1, rejected  # once, whoever saw it
    for w in workers:
        assert w.log().count("Rejected a host name") <= 1, w.name
    assert any(orphan in e for e in rejected), rejected
    # Nothing else was set aside: the good requests all went through.
    others = [e for e in rejected if e not in planted and bad_host not in e and orphan not in e]
    assert others == [], others
    assert r.zscore(K.hosts, bad_host) is None
    assert_frontier_empty(r)
    assert_clean_logs([*workers, writer])


def test_seed_pushed_three_times(own_redis, tmp_path, procs):
    url, r = own_redis
    db_path = tmp_path / "items.db"
    with TestSite(pages=100, seed=95, latency=0.01) as site:
        r.lpush(K.start_urls, site.url, site.url, site.url)
        workers = [worker(f"w{i}", url, tmp_path, "MAX_IDLE_TIME_BEFORE_CLOSE=3") for i in (1, 2)]
        writer = db_writer("dbw", url, f"sqlite:///{db_path}", tmp_path)
        procs += [*workers, writer]
        deadline = time.monotonic() + 60
        for w in workers:
            # requests:size drifting above what is queued would keep them up forever.
            left = max(deadline - time.monotonic(), 1)
            assert exit_status(w, r, left) == 0, w.log()[-3000:]
        wait_until(lambda: items_drained(r), 30, what="the item buffer to drain")
        assert writer.stop(30) == 0, writer.log()[-3000:]
        assert sorted(stored_urls(db_path)) == sorted(site.page_urls())
    assert int(r.get(K.requests_size) or 0) == queued_in_host_queues(r) == 0
    assert r.llen(K.start_urls) == 0
    assert r.lrange(K.start_urls_rejected, 0, -1) == []
    assert_frontier_empty(r)
    assert_clean_logs([*workers, writer])


def test_frozen_worker_does_not_steal_leases(own_redis, tmp_path, procs):
    """A worker stopped past its lease timeout comes back to leases that are no longer its own."""
    url, r = own_redis
    db_path = tmp_path / "items.db"
    pages = 1200
    # Two requests at a time per worker: slow enough that most of the crawl is
    # still ahead when the frozen worker comes back 8 s later.
    settings = (
        "FRONTIER_LEASE_TIMEOUT=3",
        "CONCURRENT_REQUESTS=2",
        "MAX_IDLE_TIME_BEFORE_CLOSE=4",
    )
    with TestSite(pages=pages, seed=96, latency=0.05) as site:
        r.lpush(K.start_urls, site.url)
        a, b, c = (worker(name, url, tmp_path, *settings) for name in ("A", "B", "C"))
        writer = db_writer("dbw", url, f"sqlite:///{db_path}", tmp_path)
        procs += [a, b, c, writer]
        wait_until(lambda: progress(r, db_path) > 0.3 * pages, 90, what="30% of the crawl")
        a.signal(signal.SIGSTOP)
        frozen_at = progress(r, db_path)
        time.sleep(8)  # past FRONTIER_LEASE_TIMEOUT: B or C put A's leases back
        thawed_at = progress(r, db_path)
        assert thawed_at < pages, "the crawl ended before A came back"
        # B and C publish their stats every STATS_PUBLISH_INTERVAL (5 s).
        wait_until(
            lambda: sum(stat(r, w, "frontier/leases_reclaimed") for w in (b, c)) > 0,
            10,
            what="B or C to put the frozen worker's leases back",
        )
        a.signal(signal.SIGCONT)
        b.signal(signal.SIGKILL)
        assert b.wait(10) == -signal.SIGKILL
        for w in (a, c):
            assert exit_status(w, r, 100) == 0, (w.name, w.log()[-3000:])
        wait_until(lambda: items_drained(r), 30, what="the item buffer to drain")
        assert writer.stop(30) == 0, writer.log()[-3000:]
        urls = stored_urls(db_path)
        assert sorted(set(urls)) == sorted(site.page_urls())
        assert row_count(db_path) == len(site.page_urls())
        twice = sorted(u for u, n in site.hits().items() if n > 1)
    assert_frontier_empty(r)
    assert_clean_logs([a, c, writer])
    print(
        f"scraped {frozen_at} pages when A froze, {thawed_at} when it thawed; "
        f"{len(twice)} pages served more than once: {twice[:10]}"
    )
