"""Freshness for the same fetches: adaptive revisits against a fixed RECRAWL_AFTER.

A simulated site, a clock the test steps, and the db_writer's own rule
(``recrawl.revisit_rules.advance``) and scheduling order (due rows, oldest due
first, as ``page_store.take_due`` reads them): 100 pages, 10 of which change
every minute while 90 never change, revisited within the same budget of 20
fetches a minute, and 10 minutes of it counted. A fetch "catches" a change
when it finds a version it had not seen.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from spiders_project.recrawl.config import RecrawlConfig
from spiders_project.recrawl.pages_row import PageEntry, PageRow
from spiders_project.recrawl.revisit_rules import advance

T0 = datetime(2026, 11, 24, tzinfo=UTC)
PAGES = 100
HOT = set(range(10))  # change every minute
BUDGET_PER_MINUTE = 20
TICK = 3  # seconds: 1 fetch per tick is 20 a minute
MINUTES = 10


def version(page: int, second: int) -> int:
    return second // 60 if page in HOT else 0


def fetch(page: int, second: int) -> PageEntry:
    at = T0 + timedelta(seconds=second)
    digest = f"sha1:{page}-{version(page, second)}"
    return PageEntry(
        f"https://site.example/{page}", "default", at, "fetched", 200, None, None, digest, b""
    )


def caught_changes(config: RecrawlConfig, warm_up: int = 0) -> int:
    rows: dict[int, PageRow] = {}
    for page in range(PAGES):  # the first crawl, outside the budget
        row = advance(None, fetch(page, 0), config)
        assert row is not None
        rows[page] = row
    caught = 0
    per_tick = BUDGET_PER_MINUTE * TICK // 60
    for second in range(TICK, (warm_up + MINUTES) * 60 + 1, TICK):
        now = T0 + timedelta(seconds=second)
        due = sorted(
            (row.next_due, page)
            for page, row in rows.items()
            if row.next_due is not None and row.next_due <= now
        )
        for _, page in due[:per_tick]:
            row = advance(rows[page], fetch(page, second), config)
            assert row is not None
            if second > warm_up * 60:
                caught += row.changes - rows[page].changes
            rows[page] = row
    return caught


def test_adaptive_revisits_catch_at_least_twice_the_changes_of_a_fixed_interval():
    # RECRAWL_AFTER of 5 minutes: the fixed interval this budget affords (100
    # pages at 20 a minute). The rates need visits to learn: after a first
    # crawl and 30 minutes of revisits, the next 10 minutes are counted. (From
    # the first crawl on, the first 10 minutes catch 11 changes either way:
    # each page has been visited twice at most.)
    after = 300.0
    fixed = caught_changes(RecrawlConfig(after=after), warm_up=30)
    adaptive = caught_changes(
        RecrawlConfig(after=after, adaptive=True, min_interval=60.0, max_interval=86400.0),
        warm_up=30,
    )
    possible = len(HOT) * MINUTES
    assert (fixed, adaptive, possible) == (20, 91, 100)
    assert adaptive >= 2 * fixed
