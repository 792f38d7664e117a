"""Every fetch outcome leaves its URL's row in `pages` (PAGES_ENABLED, no revisits):
a real worker and db_writer crawl a site with a redirect, a 404, a page that
always answers 503, a blocked page (403) and one whose connection closes
without an answer."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tests.support.processes import K, db_writer, published_stats, wait_until, worker
from tests.support.recrawl_site import VersionedSite

pytestmark = pytest.mark.slow

PAGES = 7


def pages(db_path: Path) -> dict[str, tuple]:
    """url -> (job, status, outcome, failures, changes, revisit_interval, next_due)."""
    if not db_path.exists():
        return {}
    with sqlite3.connect(db_path, timeout=10) as db:
        try:
            rows = db.execute(
                "SELECT url, job, status, outcome, failures, changes, revisit_interval, next_due"
                " FROM pages"
            ).fetchall()
        except sqlite3.OperationalError:
            return {}
    return {row[0]: row[1:] for row in rows}


def test_every_outcome_of_a_fetch_is_its_url_s_row(redis_url, r, tmp_path, procs):
    db_path = tmp_path / "items.db"
    with VersionedSite(PAGES, honours=set(), extras=True) as site:
        url = site.url.rstrip("/")
        expected = {
            f"{url}/moved": ("default", 301, "redirect", 0),
            f"{url}/gone": ("default", 404, "fetch_error", 1),
            # RETRY_TIMES=1: two answers, then the dead letter.
            f"{url}/down": ("default", None, "dead_letter", 3),
            f"{url}/banned": ("default", None, "dead_letter", 3),
            f"{url}/drop": ("default", None, "dead_letter", 3),
            **{site.page_url(n): ("default", 200, "fetched", 0) for n in range(PAGES)},
        }
        writer = db_writer("dbw", redis_url, f"sqlite:///{db_path}", tmp_path)
        w = worker(
            "w",
            redis_url,
            tmp_path,
            "PAGES_ENABLED=true",
            "RETRY_TIMES=1",
            "ROBOTSTXT_OBEY=false",
            "NODE_HEALTH_ENABLED=false",
            "MAX_IDLE_TIME_BEFORE_CLOSE=2",
        )
        procs += [writer, w]
        r.lpush(K.start_urls, site.url)
        assert w.wait(60) == 0, w.log()[-3000:]
        wait_until(
            lambda: {u: row[:4] for u, row in pages(db_path).items()} == expected,
            20,
            what=f"the rows of every URL: {pages(db_path)}",
        )
        writer.stop()
    rows = pages(db_path)
    # No revisits without RECRAWL_AFTER: no interval, never due.
    assert {row[5:] for row in rows.values()} == {(0.0, None)}
    assert all(row[4] == 0 for row in rows.values())
    stats = published_stats(r, w)
    # 7 pages, the 301, the 404, 2 x 503 + a dead letter, 2 x 403 + one, 2 failures + one.
    assert int(stats["pages/entries"]) == PAGES + 2 + 3 * 3
    assert "recrawl/conditional" not in stats
    assert r.llen(K.items_rejected) == 0
