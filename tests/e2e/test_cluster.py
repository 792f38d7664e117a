"""Redis Cluster (REDIS_CLUSTER): workers, the db_writer and the commands
against a real cluster of three masters started for the test."""

from __future__ import annotations

import contextlib
import os
import subprocess

import pytest

from spiders_project.keys import RedisKeys
from tests.support.processes import PYTHON, ROOT, db_writer, stored_urls, wait_until, worker
from tests.support.services import RedisClusterGroup
from tests.support.site import TestSite

pytestmark = pytest.mark.slow
CK = RedisKeys("distributed", cluster=True)
ENV = {"REDIS_CLUSTER": "true"}


@pytest.fixture
def cluster():
    group = RedisClusterGroup(masters=3)
    yield group
    group.stop()


def test_two_workers_crawl_three_hosts_on_a_cluster(cluster, tmp_path, procs):
    db_path = tmp_path / "items.db"
    client = cluster.client
    with contextlib.ExitStack() as stack:
        sites = [stack.enter_context(TestSite(pages=120, seed=20 + i)) for i in range(3)]
        for site in sites:
            client.lpush(CK.start_urls, site.url)
        workers = [
            worker(f"w{i}", cluster.url, tmp_path, "MAX_IDLE_TIME_BEFORE_CLOSE=3", env=ENV)
            for i in (1, 2)
        ]
        writer = db_writer("dbw", cluster.url, f"sqlite:///{db_path}", tmp_path, env=ENV)
        procs += [*workers, writer]
        for w in workers:
            assert w.wait(180) == 0, w.log()[-3000:]
        wait_until(
            lambda: client.llen(CK.items) == 0 and client.llen(CK.items_processing) == 0,
            60,
            what="the item buffer to drain",
        )
        assert writer.stop(30) == 0, writer.log()[-3000:]
        urls = stored_urls(db_path)
        assert len(urls) == len(set(urls)), "a page stored twice"
        expected = set().union(*(site.page_urls() for site in sites))
        assert set(urls) == expected, sorted(expected - set(urls))[:10]
        assert client.zcard(CK.leases) == 0 and int(client.get(CK.requests_size) or 0) == 0
        assert client.sismember("spiders", "distributed")
        # Every key of the spider is in its slot, on the master that owns it.
        home = cluster.master_of(CK.prefix)
        found = home.client.keys("{distributed}:*")
        assert CK.seen.encode() in found and CK.hosts.encode() not in found  # drained
        status = subprocess.run(
            [PYTHON, "-m", "scrapy", "crawlstatus", "--once"],
            cwd=ROOT,
            env={**os.environ, "REDIS_URL": cluster.url, **ENV},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert status.returncode == 0, status.stderr
        assert "| items 0 |" in status.stdout and "ETA         nothing queued" in status.stdout
