"""Recrawl (issue 28): a crawled site fetched again once its pages are due, driven by
the `pages` table alone, with conditional requests.

A real worker and db_writer (SQLite) crawl a 50-page site. The test then
changes 20% of its pages and makes every row of `pages` due (the clock the
test controls: it moves ``next_due`` into the past, as time would). The
db_writer's revisit scheduler pushes every URL back with its validators;
with RECRAWL_LINKS off no link brings a page back on its own. Of the
40 unchanged pages, 20 answer 304 and 20 ignore the conditional headers and
send the same bytes again (unchanged by content digest). The worker archives
every fetch (WARC_ENABLED): each unchanged refetch is a ``revisit`` record, each
changed one a ``response`` record.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from pathlib import Path

import pytest

from spiders_project.keys.jobs import job_look, job_quiet
from tests.support.archive import records, warc_paths
from tests.support.processes import (
    K,
    db_writer,
    items_in_hand,
    published_stats,
    scrapy_command,
    wait_until,
    worker,
)
from tests.support.recrawl_site import VersionedSite

pytestmark = pytest.mark.slow

PAGES = 50
CHANGED = {n for n in range(PAGES) if n % 5 == 4}  # 10 pages, 20%
HONOURS = {n for n in range(PAGES) if n % 2 == 0}  # half answer 304 when they can
# Links bring no page back (RECRAWL_LINKS off), however short the workers'
# RECRAWL_AFTER: every refetch below is a revisit the db_writer pushed.
SETTINGS = (
    "RECRAWL_AFTER=1",
    "RECRAWL_LINKS=false",
    "MAX_IDLE_TIME_BEFORE_CLOSE=0",
    "ROBOTSTXT_OBEY=false",
)


def query(db_path: Path, sql: str) -> list[tuple]:
    if not db_path.exists():
        return []
    with sqlite3.connect(db_path, timeout=10) as db:
        try:
            return db.execute(sql).fetchall()
        except sqlite3.OperationalError:  # not created yet
            return []


def pages(db_path: Path) -> dict[str, tuple]:
    """url -> (status, outcome, etag, digest, changes, failures, fetched_at)."""
    rows = query(
        db_path,
        "SELECT url, status, outcome, etag, digest, changes, failures, fetched_at FROM pages",
    )
    return {row[0]: row[1:] for row in rows}


def items(db_path: Path) -> dict[str, tuple[str, str]]:
    """url -> (scraped_at, data) of the items table."""
    return {u: (at, d) for u, at, d in query(db_path, "SELECT url, scraped_at, data FROM items")}


def crawl_keys(r) -> set[bytes]:
    """The crawl's keys, but each worker's stats and its record (they grow as it runs)."""
    return {k for k in r.keys() if b"stats" not in k and not k.startswith(b"distributed:worker:")}


def drained(r) -> bool:
    return (
        int(r.get(K.requests_size) or 0) == 0
        and r.zcard(K.leases) == 0
        and r.llen(K.start_urls) == 0
        and r.llen(K.items) == 0
        and items_in_hand(r) == 0
    )


def test_due_pages_are_revisited_conditionally_and_only_changed_ones_are_rewritten(
    redis_url, r, tmp_path, procs
):
    db_path = tmp_path / "items.db"
    with VersionedSite(PAGES, honours=HONOURS) as site:
        urls = {site.page_url(n): n for n in range(PAGES)}
        writer = db_writer(
            "dbw", redis_url, f"sqlite:///{db_path}", tmp_path, "-s", "RECRAWL_AFTER=3600"
        )
        warc_dir = tmp_path / "warc"
        w = worker("w", redis_url, tmp_path, *SETTINGS, "WARC_ENABLED=true", f"WARC_DIR={warc_dir}")
        procs += [writer, w]
        r.lpush(K.start_urls, site.url)
        wait_until(lambda: set(pages(db_path)) == set(urls), 60, what="the first crawl")
        wait_until(lambda: set(items(db_path)) == set(urls), 30, what="the first items")
        wait_until(lambda: drained(r), 30, what="the frontier to drain")
        first_pages, first_items = pages(db_path), items(db_path)
        first_hits = len(site.log())
        keys_before = crawl_keys(r)
        sizes_before = {k: r.memory_usage(k) or 0 for k in keys_before}
        memory_before = sum(sizes_before.values())
        assert all(row[1] == "fetched" and row[4] == 0 for row in first_pages.values())

        site.change(CHANGED)
        with sqlite3.connect(db_path, timeout=10) as db:  # the test's clock: all due now
            db.execute("UPDATE pages SET next_due = '2000-01-01T00:00:00.000000+00:00'")

        def all_refetched() -> bool:
            now = pages(db_path)
            return set(now) == set(urls) and all(now[u][6] > first_pages[u][6] for u in urls)

        wait_until(all_refetched, 30, what="every page fetched again")
        wait_until(lambda: drained(r), 30, what="the frontier to drain again")
        wait_until(
            lambda: all(
                items(db_path)[u][0] > first_items[u][0] for u, n in urls.items() if n in CHANGED
            ),
            20,
            what="the changed pages' items",
        )
        second = site.log()[first_hits:]
        assert w.alive(), w.log()[-3000:]
        w.stop()
        writer.stop()
        stats = published_stats(r, w)
        keys_after = crawl_keys(r)
        sizes_after = {k: r.memory_usage(k) or 0 for k in keys_before & keys_after}
        memory_after = sum(sizes_after.values())

    refetches = [hit for hit in second if hit.path != "/robots.txt"]
    assert Counter(hit.path for hit in refetches) == Counter(site.path(n) for n in range(PAGES))
    # Conditional headers on every refetch.
    assert all(hit.if_none_match and hit.if_modified_since for hit in refetches), refetches
    unchanged = set(range(PAGES)) - CHANGED
    not_modified = {int(h.path.rpartition("/")[2] or 0) for h in refetches if h.status == 304}
    assert not_modified == unchanged & HONOURS  # 20 pages: 304
    # 80% unchanged (304 or the same digest), 20% changed, as the site says.
    assert int(stats["recrawl/not_modified"]) == len(unchanged & HONOURS) == 20
    assert int(stats["recrawl/unchanged"]) == len(unchanged) == 40
    assert int(stats["recrawl/changed"]) == len(CHANGED) == 10
    assert int(stats["recrawl/conditional"]) == PAGES

    # The pages table's counts match the site's.
    rows = pages(db_path)
    for url, n in urls.items():
        status, outcome, etag, digest, changes, failures, _ = rows[url]
        assert etag == f'"{n}-{site.versions[n]}"'
        assert failures == 0
        if n in CHANGED:
            assert (status, outcome, changes) == (200, "fetched", 1), url
            assert digest != first_pages[url][3]
        elif n in HONOURS:
            assert (status, outcome, changes) == (304, "not_modified", 0), url
            assert digest == first_pages[url][3]
        else:
            assert (status, outcome, changes) == (200, "fetched", 0), url
            assert digest == first_pages[url][3]
    counts = dict(query(db_path, "SELECT outcome, COUNT(*) FROM pages GROUP BY outcome"))
    assert counts == {"fetched": 30, "not_modified": 20}
    assert query(db_path, "SELECT SUM(changes) FROM pages") == [(len(CHANGED),)]

    # Unchanged pages were neither parsed nor rewritten; changed ones were updated.
    stored = items(db_path)
    for url, n in urls.items():
        if n in CHANGED:
            assert f"v{site.versions[n]}" in stored[url][1]
        else:
            assert stored[url] == first_items[url], url
    # The archive: per page, its first fetch's response record, then its
    # refetch's: a revisit when unchanged (a 304: server-not-modified; the same
    # digest: identical-payload-digest), a response when changed.
    kinds: dict[str, list[str]] = {}
    for path in warc_paths(warc_dir):
        for record, _ in records(path):
            if record.rec_type in ("response", "revisit"):
                uri = record.rec_headers.get_header("WARC-Target-URI")
                profile = record.rec_headers.get_header("WARC-Profile") or ""
                kinds.setdefault(uri, []).append(
                    record.rec_type + (":" + profile.rpartition("/")[2] if profile else "")
                )
    for url, n in urls.items():
        if n in CHANGED:
            second_kind = "response"
        elif n in HONOURS:
            second_kind = "revisit:server-not-modified"
        else:
            second_kind = "revisit:identical-payload-digest"
        assert kinds[url] == ["response", second_kind], (url, kinds[url])
    # The job counts an unchanged revisit as a page fetched, with no item.
    shown = scrapy_command(redis_url, "jobs", "show", "default", "--json")
    assert shown.returncode == 0, shown.stderr
    job = json.loads(shown.stdout)
    assert (job["pages"], job["items"]) == (2 * PAGES, PAGES + len(CHANGED)), job
    # Revisits left nothing behind in Redis: no new key but the default job's
    # record, events and finish detection's quiet mark and look (written when
    # the crawl goes quiet, revisits or not, at a time the test does not set:
    # under load the first drain can be seen before the mark was written), and
    # the crawl's keys hold what they held.
    finishing = {K.jobs, K.jobs_events, job_quiet(K), job_look(K)}
    assert keys_after - keys_before <= {key.encode() for key in finishing}
    print(f"Redis bytes of the crawl's keys: {memory_before} before, {memory_after} after")
    assert memory_after - memory_before <= PAGES, (memory_before, memory_after)  # < 1 B a URL
