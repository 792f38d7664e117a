"""Redis Cluster (REDIS_CLUSTER): workers, the db_writer and the commands
against a real cluster of three masters started for the test, the frontier
split into one shard per master (FRONTIER_SHARDS auto)."""

from __future__ import annotations

import contextlib
import hashlib
import signal
import subprocess
import time

import pytest

from spiders_project.crawl.hosts import host_of
from spiders_project.frontier.calls import seed_digest
from spiders_project.keys import RedisKeys
from spiders_project.keys.jobs import job_counts
from tests.support.monitoring import Exporter
from tests.support.processes import (
    db_writer,
    items_drained,
    published_stats,
    scrapy_command,
    stored_urls,
    wait_until,
    worker,
)
from tests.support.services import RedisClusterGroup, RedisServer, free_port
from tests.support.site import TestSite

pytestmark = pytest.mark.slow
CK = RedisKeys("distributed", cluster=True, shards=3)
ENV = {"REDIS_CLUSTER": "true"}


@pytest.fixture
def cluster():
    group = RedisClusterGroup(masters=3)
    yield group
    group.stop()


def sites_on_every_shard(stack: contextlib.ExitStack, pages: int) -> list[TestSite]:
    """Three test sites whose hosts fall in three different shards (their
    ports are free ones, so their shards are drawn anew each time)."""
    by_shard: dict[int, TestSite] = {}
    for attempt in range(60):
        site = TestSite(pages=pages, seed=20 + attempt)
        site.start()
        shard = CK.shard_of(host_of(site.url))
        if shard in by_shard:
            site.stop()
            continue
        stack.callback(site.stop)
        by_shard[shard] = site
        if len(by_shard) == 3:
            return list(by_shard.values())
    raise AssertionError("no free ports for three shards")


def scrapy(cluster: RedisClusterGroup, *argv: str) -> subprocess.CompletedProcess[str]:
    """``scrapy <argv>`` against the cluster, its output captured."""
    return scrapy_command(cluster.url, *argv, env=ENV)


def crawled_once(workers, writer, client, db_path, sites, timeout: float) -> set[str]:
    """Wait for the workers to finish and the db_writer to drain the item buffer;
    assert every page of ``sites`` was stored, once. Returns their URLs."""
    for w in workers:
        assert w.wait(timeout) == 0, w.log()[-3000:]
    wait_until(lambda: items_drained(client, CK), 60, what="the item buffer to drain")
    assert writer.stop(30) == 0, writer.log()[-3000:]
    urls = stored_urls(db_path)
    assert len(urls) == len(set(urls)), "a page stored twice"
    expected = set().union(*(site.page_urls() for site in sites))
    assert set(urls) == expected, sorted(expected - set(urls))[:10]
    return expected


def test_two_workers_crawl_three_hosts_on_a_cluster(cluster, tmp_path, procs):
    db_path = tmp_path / "items.db"
    client = cluster.client
    with contextlib.ExitStack() as stack:
        sites = sites_on_every_shard(stack, pages=120)
        for site in sites:
            client.lpush(CK.start_urls, site.url)
        # A host that refuses connections: its page fails for good (a dead letter).
        refused = f"http://127.0.0.1:{free_port()}/"
        client.lpush(CK.start_urls, refused)
        workers = [
            worker(f"w{i}", cluster.url, tmp_path, "MAX_IDLE_TIME_BEFORE_CLOSE=3", env=ENV)
            for i in (1, 2)
        ]
        writer = db_writer("dbw", cluster.url, f"sqlite:///{db_path}", tmp_path, env=ENV)
        procs += [*workers, writer]
        exporter = Exporter(cluster.url, tmp_path, "REDIS_CLUSTER=true")
        stack.callback(exporter.close)
        expected = crawled_once(workers, writer, client, db_path, sites, timeout=180)
        assert int(client.get(CK.frontier_shards)) == 3  # auto: one per master
        for shard in CK.all_shards:
            assert client.zcard(shard.leases) == 0 and int(client.get(shard.requests_size)) == 0
        assert client.sismember("spiders", "distributed")
        # Each shard's keys (its seen-set, at least) are on a master of their
        # own; the spider's own keys (items, stats, seeds) on the master of its slot.
        masters = {node.port for node in cluster.masters()}
        owners = {cluster.master_of(shard.frontier_prefix).port for shard in CK.all_shards}
        assert owners == masters
        for shard in CK.all_shards:
            node = cluster.master_of(shard.frontier_prefix)
            assert node.client.get(shard.seen), shard.frontier_prefix
            assert node.client.keys(shard.frontier_prefix.replace("{", "\\{") + "seen:*")
        home = cluster.master_of(CK.prefix)
        assert home.client.exists(CK.stats_totals, CK.db_writer_stats) == 2
        # The exporter sums the shards: every page's fingerprint, none queued.
        # Memory: the master nearest its maxmemory (one INFO reads one node).
        fullest = cluster.masters()[-1]
        fullest.client.config_set("maxmemory", 256 * 1024 * 1024)
        metrics = exporter.scrape()
        assert metrics.get("crawler_redis_up") == 1
        assert metrics.get("crawler_redis_maxmemory_bytes") == 256 * 1024 * 1024
        used = fullest.client.info("memory")["used_memory"]
        assert abs(metrics.get("crawler_redis_used_memory_bytes") - used) < 1024 * 1024
        assert metrics.get("crawler_dupefilter_size", spider="distributed") >= len(expected)
        assert metrics.get("crawler_queue_length", spider="distributed", queue="requests") == 0
        status = scrapy(cluster, "crawlstatus", "--once")
        assert status.returncode == 0, status.stderr
        assert "| items 0 |" in status.stdout and "ETA         nothing queued" in status.stdout
        # deadletters: the refused page goes back to its host's shard. Both
        # workers may have read its seed; its shard queued it once (a
        # sharded frontier claims a seed after queueing it: seeds:taken).
        assert client.llen(CK.dead) == 1
        taken = CK.for_host(host_of(refused)).seeds_taken
        assert client.zscore(taken, seed_digest(refused.encode())) is not None
        requeue = scrapy(cluster, "deadletters", "requeue", "--all")
        assert requeue.returncode == 0, requeue.stderr
        assert client.llen(CK.dead) == 0
        shard = CK.for_host(host_of(refused))
        assert int(client.get(shard.requests_size)) == 1
        assert client.zcard(shard.hosts) == 1


@pytest.fixture
def replicated_cluster():
    group = RedisClusterGroup(masters=3, replicas=1)
    yield group
    group.stop()


def counts_left(client) -> dict[str, int]:
    """Every count of the cluster that is not 0: seeds, and of each shard and
    lane its queued requests, leases, slots taken or given back, cap waiters,
    and its jobs' queued, later, leased and slots counts (what the idle rule
    and the jobs' finish rule read, and what they are derived from)."""
    left: dict[str, int] = {CK.start_urls: client.llen(CK.start_urls)}
    for shard in CK.all_shards:
        for lane in shard.all_lanes:
            left[lane.requests_size] = int(client.get(lane.requests_size) or 0)
            left[lane.leases] = client.zcard(lane.leases)
            left[lane.lease_info] = client.hlen(lane.lease_info)
            left[lane.in_flight] = client.hlen(lane.in_flight)
            left[lane.cap_waiters] = client.hlen(lane.cap_waiters)
            left[lane.released] = client.exists(lane.released)
        for field, value in client.hgetall(job_counts(shard)).items():
            if field.decode().rpartition("|")[2] in ("queued", "later", "leased", "slots"):
                left[f"{job_counts(shard)} {field.decode()}"] = int(value)
    return {name: n for name, n in left.items() if n}


def test_a_master_killed_mid_crawl_loses_nothing_on_a_cluster(replicated_cluster, tmp_path, procs):
    """A master SIGKILLed mid-crawl, its replica promoted: every page is stored
    once, then every worker closes when idle, within its idle time and a lease
    timeout (a lease the old master's last writes left without a holder) of
    the last page stored, and no count is left above 0, not even those planted
    above what they count on the promoted master: one left there would keep
    every worker waiting for work that does not exist (frontier/reconcile.py)."""
    cluster = replicated_cluster
    db_path = tmp_path / "items.db"
    client = cluster.client
    idle, lease = 3, 10
    settings = (
        f"MAX_IDLE_TIME_BEFORE_CLOSE={idle}",
        f"FRONTIER_LEASE_TIMEOUT={lease}",
        "DOWNLOAD_DELAY=0.02",
    )
    with contextlib.ExitStack() as stack:
        sites = sites_on_every_shard(stack, pages=200)
        for site in sites:
            client.lpush(CK.start_urls, site.url)
        workers = [worker(f"w{i}", cluster.url, tmp_path, *settings, env=ENV) for i in (1, 2)]
        writer = db_writer("dbw", cluster.url, f"sqlite:///{db_path}", tmp_path, env=ENV)
        procs += [*workers, writer]
        # Both crawling when the master dies (a worker still starting would
        # meet the failover in its start checks instead).
        wait_until(lambda: client.zcard(CK.workers) == 2, 120, what="both workers to start")
        wait_until(lambda: len(stored_urls(db_path)) >= 60, 90, what="the crawl to be under way")
        assert len(stored_urls(db_path)) < 450, "killed too late to prove anything"
        # The master of the spider's own slot (items, seeds, acks of its shard).
        victim = cluster.master_of(CK.prefix)
        victim.executor.process.send_signal(signal.SIGKILL)
        wait_until(
            lambda: getattr(cluster.owner(CK.prefix), "port", victim.port) != victim.port,
            60,
            what="a replica promoted",
        )
        assert [p.name for p in (*workers, writer) if not p.alive()] == [], "a process died"
        # Counts the promoted master holds above what they count, as a write lost
        # on one side would leave them (a replica applies each script whole, so
        # this failover loses counts and structures together: planted here).
        home = cluster.master_of(CK.prefix).port
        [shard] = [s for s in CK.all_shards if cluster.master_of(s.frontier_prefix).port == home]
        client.incrby(shard.requests_size, 2)
        client.hincrby(shard.in_flight, "gone.invalid", 3)
        client.hincrby(job_counts(shard), "default|leased", 1)
        expected = set().union(*(site.page_urls() for site in sites))
        wait_until(lambda: set(stored_urls(db_path)) >= expected, 240, 0.5, "every page stored")
        deadline = time.monotonic() + idle + lease + 30
        for w in workers:
            try:
                w.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                raise AssertionError(
                    f"{w.name} still waiting {idle + lease + 30} s after the last page; "
                    f"counts left: {counts_left(client)}\n{w.log()[-3000:]}"
                ) from None
        crawled_once(workers, writer, client, db_path, sites, timeout=1)
        assert counts_left(client) == {}
        corrected = sum(
            int(published_stats(client, w, CK).get("frontier/counts_reconciled", 0))
            for w in workers
        )
        assert corrected >= 3, [w.log()[-2000:] for w in workers]


def test_a_worker_told_another_shard_count_refuses_to_start(cluster):
    # The first process of the spider records the count (auto: one per master).
    assert scrapy(cluster, "deadletters", "list").returncode == 0
    assert int(cluster.client.get(CK.frontier_shards)) == 3
    refused = scrapy(cluster, "crawl", "distributed", "-s", "FRONTIER_SHARDS=2")
    output = refused.stdout + refused.stderr
    assert refused.returncode == 2, output
    assert "Traceback" not in output, output
    [line] = [line for line in output.splitlines() if "FRONTIER_SHARDS" in line]
    assert "ERROR" in line and CK.frontier_shards in line and "3 shards" in line
    assert int(cluster.client.get(CK.frontier_shards)) == 3


def test_a_stopped_crawl_moves_from_one_redis_onto_the_cluster(cluster, tmp_path, procs):
    """``scrapy crawlmove``: a crawl under way on one Redis, its workers
    stopped, copied onto the cluster, where two workers finish it: every page
    stored once, and no page fetched before the move is fetched again (the
    seen-set went into every shard)."""
    single = RedisServer()
    db_path = tmp_path / "items.db"
    client = cluster.client
    old = RedisKeys("distributed")
    try:
        with contextlib.ExitStack() as stack:
            sites = sites_on_every_shard(stack, pages=100)
            for site in sites:
                single.client.lpush(old.start_urls, site.url)
            first = worker("w0", single.url, tmp_path, "DOWNLOAD_DELAY=0.02")
            writer = db_writer("dbw0", single.url, f"sqlite:///{db_path}", tmp_path)
            procs += [first, writer]
            wait_until(lambda: len(stored_urls(db_path)) >= 60, 90, what="the crawl under way")
            assert first.stop(30) == 0, first.log()[-3000:]
            moved_at = time.monotonic()
            wait_until(lambda: items_drained(single.client, old), 60, what="the items written")
            assert writer.stop(30) == 0, writer.log()[-3000:]
            before = set(stored_urls(db_path))
            queued = int(single.client.get(old.requests_size))
            assert queued > 0 and len(before) < 250, "stopped too late to prove anything"
            # The previous release's hex fingerprints, still to migrate.
            old_set = [hashlib.sha1(b"old %d" % i).hexdigest() for i in range(5)]
            single.client.sadd(old.dupefilter, *old_set)
            # A seed nobody read yet moves with the rest.
            late = TestSite(pages=20, seed=99)
            late.start()
            stack.callback(late.stop)
            single.client.lpush(old.start_urls, late.url)

            move = scrapy(cluster, "crawlmove", "--from", single.url)
            assert move.returncode == 0, move.stdout + move.stderr
            assert f"Moved the crawl of distributed: {queued} queued requests" in move.stdout
            assert int(client.get(CK.frontier_shards)) == 3
            assert sum(int(client.get(s.requests_size)) for s in CK.all_shards) == queued
            seen = int(single.client.get(old.seen))
            assert [int(client.get(s.seen)) for s in CK.all_shards] == [seen] * 3
            assert client.lrange(CK.start_urls, 0, -1) == [late.url.encode()]
            assert int(single.client.get(old.requests_size)) == queued, "the source was changed"
            again = scrapy(cluster, "crawlmove", "--from", single.url)
            assert again.returncode == 1 and "--overwrite" in again.stderr, again.stderr
            # The old set went into every shard; each shard migrates its own.
            assert [client.scard(s.dupefilter) for s in CK.all_shards] == [5] * 3
            migrate = scrapy(cluster, "dupefilter", "migrate")
            assert migrate.returncode == 0, migrate.stderr
            assert "Moved 15 fingerprints" in migrate.stdout, migrate.stdout
            assert not any(client.exists(s.dupefilter) for s in CK.all_shards)
            assert [int(client.get(s.seen)) for s in CK.all_shards] == [seen + 5] * 3

            workers = [
                worker(f"w{i}", cluster.url, tmp_path, "MAX_IDLE_TIME_BEFORE_CLOSE=3", env=ENV)
                for i in (1, 2)
            ]
            writer = db_writer("dbw", cluster.url, f"sqlite:///{db_path}", tmp_path, env=ENV)
            procs += [*workers, writer]
            crawled_once(workers, writer, client, db_path, [*sites, late], timeout=180)
            refetched = {
                url
                for site in sites
                for at, host, target, _ in site.request_log()
                if at > moved_at and (url := f"http://{host}{target}") in before
            }
            assert refetched == set(), sorted(refetched)[:5]
    finally:
        single.stop()
