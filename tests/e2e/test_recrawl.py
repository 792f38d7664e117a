"""RECRAWL_AFTER with RECRAWL_LINKS on, a real worker and db_writer: pages seen longer
ago than it are fetched again when found again, their rows updated in place; a seed's
own "recrawl_after" wins for its pages. (RECRAWL_LINKS is off by default: revisits
then come from the pages table, tests/e2e/test_recrawl_pages.py.)"""

from __future__ import annotations

import json
import sqlite3
import time
from collections import Counter

import pytest

from tests.support.processes import K, db_writer, published_stats, stat, wait_until, worker
from tests.support.site import TestSite

pytestmark = pytest.mark.slow


def rows(db_path) -> dict[str, tuple[int, str]]:
    """url -> (rows with that url, scraped_at) in the db_writer's table."""
    if not db_path.exists():
        return {}
    with sqlite3.connect(db_path) as db:
        try:
            found = db.execute("SELECT url, COUNT(*), MAX(scraped_at) FROM items GROUP BY url")
            return {url: (n, at) for url, n, at in found}
        except sqlite3.OperationalError:  # not created yet
            return {}


def frontier_empty(r) -> bool:
    return int(r.get(K.requests_size) or 0) == 0 and r.zcard(K.leases) == 0


def test_pages_seen_longer_ago_than_recrawl_after_are_crawled_again_and_updated(
    redis_url, r, tmp_path, procs
):
    db_path = tmp_path / "items.db"
    with TestSite(pages=25, hosts=2) as site:
        a, b = site.urls
        pages_a = {u for u in site.page_urls() if u.startswith(a)}
        pages_b = site.page_urls() - pages_a
        writer = db_writer("dbw", redis_url, f"sqlite:///{db_path}", tmp_path)
        # One worker for both rounds: its own pre-filter of fingerprints sent must
        # let the pages go again too, not only the seen-set in Redis.
        w = worker(
            "w",
            redis_url,
            tmp_path,
            "RECRAWL_AFTER=2",
            "RECRAWL_LINKS=true",
            "MAX_IDLE_TIME_BEFORE_CLOSE=0",
            "STATS_PUBLISH_INTERVAL=0.5",
        )
        procs += [writer, w]
        # Site a with RECRAWL_AFTER (2 s); site b's seed with its own, of an hour.
        seeds = [a, json.dumps({"url": b, "recrawl_after": 3600})]
        r.lpush(K.start_urls, *seeds)
        wait_until(lambda: set(rows(db_path)) == site.page_urls(), 90, what="the first round")
        wait_until(lambda: frontier_empty(r), 30, what="the frontier to drain")
        first = rows(db_path)
        hits_first = Counter(site.hits())
        assert all(hits_first[u] == 1 for u in site.page_urls()), "each page once"
        assert r.get(K.seen_mode).startswith(b"timed ")

        time.sleep(2.5)
        r.lpush(K.start_urls, *seeds)
        wait_until(
            lambda: all(site.hits()[u] == 2 for u in pages_a), 90, what="site a crawled again"
        )
        # What else would come, has come: the worker published that it parsed b's
        # seed again (one item per page: both sites, site a again, b's seed), then
        # published once more, and the frontier was empty after that: b's links,
        # had they been queued, would have been fetched by then.
        again = len(site.page_urls()) + len(pages_a) + 1
        wait_until(lambda: stat(r, w, "item_scraped_count") >= again, 30, what="b's seed parsed")
        parsed_at = published_stats(r, w)["_last_seen"]
        wait_until(
            lambda: published_stats(r, w)["_last_seen"] != parsed_at and frontier_empty(r),
            30,
            what="a publish after b's seed was parsed, and the frontier empty",
        )
        hits = Counter(site.hits())
        wait_until(
            lambda: all(rows(db_path)[u][1] > first[u][1] for u in pages_a),
            30,
            what="site a's rows updated",
        )
        assert w.alive(), w.log()[-3000:]
        w.stop()
        writer.stop()
    stored = rows(db_path)
    assert set(stored) == site.page_urls()
    assert {u: n for u, (n, _) in stored.items() if n != 1} == {}, "never duplicated"
    # Site b: only its seed again (a seed pushed again is always fetched again).
    assert {u: hits[u] for u in pages_b if hits[u] != 1} == {b: 2}
    assert all(stored[u][1] == first[u][1] for u in pages_b - {b}), "b's pages untouched"


def test_a_seed_with_recrawl_after_is_refused_without_recrawl_after(redis_url, r, tmp_path, procs):
    with TestSite(pages=5) as site:
        bad = json.dumps({"url": site.url, "recrawl_after": 60})
        r.lpush(K.start_urls, bad)
        w = worker("w", redis_url, tmp_path, "MAX_IDLE_TIME_BEFORE_CLOSE=2")
        procs.append(w)
        assert w.wait(60) == 0, w.log()[-3000:]
        assert site.hits() == Counter()
    assert r.lrange(K.start_urls_rejected, 0, -1) == [bad.encode()]
    assert "recrawl_after needs RECRAWL_AFTER set" in w.log()
