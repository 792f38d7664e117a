"""The seen-set with real workers: an online migration from the previous release's
set of hex fingerprints, and one mode per spider."""

from __future__ import annotations

import hashlib
import os
import subprocess

import pytest
from scrapy import Request

from spiders_project.spiders.distributed import DistributedSpider
from tests.support.crawlers import project_crawler
from tests.support.processes import PYTHON, ROOT, K, wait_until, worker
from tests.support.site import TestSite

pytestmark = pytest.mark.slow


def dupefilter_migrate(redis_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYTHON, "-m", "scrapy", "dupefilter", "migrate", *args],
        cwd=ROOT,
        env={**os.environ, "REDIS_URL": redis_url},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_migration_while_a_worker_crawls_loses_and_doubles_nothing(redis_url, r, tmp_path, procs):
    with TestSite(pages=400, seed=3) as site:
        crawler = project_crawler(DistributedSpider, {"REDIS_URL": redis_url})
        pages = sorted(site.page_urls() - {site.url})
        # The previous release had seen every other page (and much else).
        old = pages[::2]
        hexes = [crawler.request_fingerprinter.fingerprint(Request(u)).hex() for u in old]
        padding = [hashlib.sha1(str(i).encode()).hexdigest() for i in range(30_000)]
        r.sadd(K.dupefilter, *hexes, *padding)
        r.lpush(K.start_urls, site.url)
        w = worker("w", redis_url, tmp_path, "MAX_IDLE_TIME_BEFORE_CLOSE=3", "DOWNLOAD_DELAY=0.01")
        procs.append(w)
        wait_until(lambda: len(site.hits()) >= 20, 60, what="the crawl to start")
        migrate = dupefilter_migrate(redis_url, "--batch", "200")
        assert migrate.returncode == 0, migrate.stderr
        assert f"Moved {len(hexes) + len(padding)} fingerprints" in migrate.stdout
        assert w.alive, "the migration ended before the crawl: it proves nothing"
        assert w.wait(180) == 0, w.log()[-3000:]
        hits = site.hits()
    assert not r.exists(K.dupefilter)
    assert [u for u in old if hits[u]] == [], "a page the old set had seen was fetched"
    assert {u: n for u, n in hits.items() if n > 1} == {}
    assert sum(1 for u in pages[1::2] if hits[u]) > 20
    # Run again: nothing left to do.
    again = dupefilter_migrate(redis_url)
    assert again.returncode == 0 and "Moved 0 fingerprints" in again.stdout


def test_a_worker_in_another_mode_refuses_to_start(redis_url, r, tmp_path, procs):
    r.set(K.seen_mode, "exact")
    w = worker("w", redis_url, tmp_path, "DUPEFILTER_MODE=bloom", "MAX_IDLE_TIME_BEFORE_CLOSE=2")
    procs.append(w)
    assert w.wait(60) == 2  # a setting problem, said in one line before anything starts
    log = w.log()
    assert "ERROR: DUPEFILTER_MODE (with DUPEFILTER_CAPACITY, DUPEFILTER_ERROR_RATE, " in log
    assert "but this spider's seen-set in Redis is 'exact'" in log and "Traceback" not in log
    assert r.get(K.seen_mode) == b"exact"
