"""Failover without loss: Redis Sentinel promotes a replica when the master is
SIGKILLed mid-crawl, every process finds the new master, and the crawl
completes with every page stored once (REDIS_WAIT_REPLICAS: writes a worker
counted done were on the replica before the master died)."""

from __future__ import annotations

import os
import signal
import subprocess

import pytest
import redis

from tests.support.processes import (
    PYTHON,
    ROOT,
    K,
    db_writer,
    items_drained,
    stored_urls,
    wait_until,
    worker,
)
from tests.support.sentinels import SentinelGroup
from tests.support.site import TestSite

pytestmark = pytest.mark.slow
SLOW = ("MAX_IDLE_TIME_BEFORE_CLOSE=3", "DOWNLOAD_DELAY=0.02")


@pytest.fixture
def sentinels():
    group = SentinelGroup(replicas=1)
    yield group
    group.stop()


def test_a_master_killed_mid_crawl_loses_nothing_with_sentinel(sentinels, tmp_path, procs):
    env = {"REDIS_SENTINELS": sentinels.setting, "REDIS_SENTINEL_MASTER": sentinels.name}
    # REDIS_URL gives only the db; the sentinels say where the master is.
    url = "redis://127.0.0.1:9/0"
    db_path = tmp_path / "items.db"
    master = sentinels.master.client
    with TestSite(pages=450, seed=5) as site:
        master.lpush(K.start_urls, site.url)
        workers = [
            # 50 pages/s for the cluster: about 9 s of crawl, the kill lands in it.
            worker(f"w{i}", url, tmp_path, *SLOW, env=env)
            for i in (1, 2)
        ]
        writer = db_writer("dbw", url, f"sqlite:///{db_path}", tmp_path, env=env)
        procs += [*workers, writer]
        wait_until(lambda: len(stored_urls(db_path)) >= 60, 90, what="the crawl to be under way")
        assert len(stored_urls(db_path)) < 300, "killed too late to prove anything"
        old = ("127.0.0.1", sentinels.master.port)
        sentinels.master.executor.process.send_signal(signal.SIGKILL)
        wait_until(lambda: sentinels.master_address() != old, 60, what="a replica promoted")
        new = redis.Redis(port=sentinels.master_address()[1])
        procs_alive = [p for p in (*workers, writer) if not p.alive()]
        assert procs_alive == [], "a process died with the master"
        for w in workers:
            assert w.wait(240) == 0, w.log()[-3000:]
        wait_until(lambda: items_drained(new), 60, what="the item buffer to drain")
        assert writer.stop(30) == 0, writer.log()[-3000:]
        urls = stored_urls(db_path)
        assert len(urls) == len(set(urls)), "a page stored twice"
        assert set(urls) == site.page_urls(), sorted(site.page_urls() - set(urls))[:10]
        assert new.zcard(K.leases) == 0 and int(new.get(K.requests_size) or 0) == 0
        # The commands find the new master through the sentinels too.
        status = subprocess.run(
            [PYTHON, "-m", "scrapy", "crawlstatus", "--once"],
            cwd=ROOT,
            env={**os.environ, "REDIS_URL": url, **env},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert status.returncode == 0, status.stderr
        assert "| items 0 |" in status.stdout and "ETA         nothing queued" in status.stdout
        new.close()
    for p in (*workers, writer):
        assert "Traceback" not in p.log(), p.log()[-3000:]
