"""recrawl/revisit_rules.py: each URL's row advanced by its page entries, and its intervals."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import orjson
import pytest

from spiders_project.recrawl.config import RecrawlConfig
from spiders_project.recrawl.pages_row import PageEntry, PageRow, page_entry, parse_page
from spiders_project.recrawl.revisit_rules import advance, due_after_push, next_interval

T0 = datetime(2026, 11, 24, 10, 0, tzinfo=UTC)
URL = "https://example.com/p/1"
FIXED = RecrawlConfig(after=100.0)
ADAPTIVE = RecrawlConfig(after=100.0, adaptive=True, min_interval=10.0, max_interval=1000.0)


def entry(at: datetime, outcome: str = "fetched", **fields: object) -> PageEntry:
    raw = page_entry(URL, "default", at.isoformat(), outcome, **fields)  # type: ignore[arg-type]
    return parse_page(orjson.loads(raw), raw)


def fetched(at: datetime, digest: str, etag: str | None = None) -> PageEntry:
    return entry(at, status=200, digest=digest, etag=etag)


def test_a_first_fetch_starts_the_history():
    row = advance(None, fetched(T0, "sha1:A", '"1"'), FIXED)
    assert row is not None
    assert (row.changes, row.failures, row.interval) == (0, 0, 100.0)
    assert row.next_due == T0 + timedelta(seconds=100)
    assert (row.etag, row.digest, row.outcome, row.status) == ('"1"', "sha1:A", "fetched", 200)
    assert row.page_state()["fetched_at"] == "2026-11-24T10:00:00.000000+00:00"


def test_no_revisits_no_due_time():
    row = advance(None, fetched(T0, "sha1:A"), RecrawlConfig())
    assert row is not None and row.next_due is None and row.interval == 0.0


def test_changes_are_counted_against_the_last_digest_and_newer_wins():
    first = advance(None, fetched(T0, "sha1:A"), FIXED)
    assert first is not None
    same = advance(first, fetched(T0 + timedelta(seconds=100), "sha1:A"), FIXED)
    assert same is not None and same.changes == 0
    changed = advance(same, fetched(T0 + timedelta(seconds=200), "sha1:B"), FIXED)
    assert changed is not None and changed.changes == 1 and changed.digest == "sha1:B"
    # The same entry again (a replayed batch), or an older one: nothing moves.
    assert advance(changed, fetched(T0 + timedelta(seconds=200), "sha1:C"), FIXED) is None
    assert advance(changed, fetched(T0 + timedelta(seconds=150), "sha1:C"), FIXED) is None


def test_a_304_keeps_the_content_and_refreshes_the_row():
    first = advance(None, fetched(T0, "sha1:A", '"1"'), FIXED)
    later = T0 + timedelta(seconds=100)
    row = advance(first, entry(later, "not_modified", status=304), FIXED)
    assert row is not None
    assert (row.outcome, row.status, row.fetched_at) == ("not_modified", 304, later)
    assert (row.etag, row.digest, row.changes) == ('"1"', "sha1:A", 0)
    assert row.next_due == later + timedelta(seconds=100)


def test_failures_count_in_a_row_and_keep_the_validators():
    row: PageRow | None = advance(None, fetched(T0, "sha1:A", '"1"'), FIXED)
    for i, outcome in enumerate(("fetch_error", "blocked", "dead_letter"), start=1):
        row = advance(row, entry(T0 + timedelta(seconds=i), outcome), FIXED)
        assert row is not None and row.failures == i
        assert (row.etag, row.digest) == ('"1"', "sha1:A")
    row = advance(row, fetched(T0 + timedelta(seconds=9), "sha1:A"), FIXED)
    assert row is not None and row.failures == 0
    first_error = advance(None, entry(T0, "fetch_error"), FIXED)
    assert first_error is not None and first_error.failures == 1


def test_adaptive_intervals_follow_what_each_fetch_found():
    row = advance(None, fetched(T0, "sha1:A"), ADAPTIVE)
    assert row is not None and row.interval == 100.0
    row = advance(row, fetched(T0 + timedelta(seconds=100), "sha1:B"), ADAPTIVE)
    assert row is not None and row.interval == pytest.approx(80.0)  # changed
    row = advance(row, entry(T0 + timedelta(seconds=200), "not_modified", status=304), ADAPTIVE)
    assert row is not None and row.interval == pytest.approx(112.0)  # unchanged
    assert row.next_due == T0 + timedelta(seconds=200 + 112.0)
    row = advance(row, entry(T0 + timedelta(seconds=300), "fetch_error"), ADAPTIVE)
    assert row is not None and row.interval == pytest.approx(112.0)  # a failure says nothing


def test_a_fixed_interval_is_recrawl_after_whatever_happened():
    fixed = RecrawlConfig(after=100.0)
    assert next_interval(fixed, 100.0, True) == 100.0
    assert next_interval(fixed, 250.0, False) == 100.0


def test_adaptive_intervals_shrink_on_change_grow_without_and_stay_in_bounds():
    adaptive = RecrawlConfig(after=100.0, adaptive=True, min_interval=50.0, max_interval=200.0)
    assert next_interval(adaptive, 100.0, True) == pytest.approx(80.0)  # x (1 - 0.2)
    assert next_interval(adaptive, 100.0, False) == pytest.approx(140.0)  # x (1 + 0.4)
    assert next_interval(adaptive, 60.0, True) == 50.0  # the floor
    assert next_interval(adaptive, 180.0, False) == 200.0  # the ceiling
    interval = 100.0
    for _ in range(10):
        interval = next_interval(adaptive, interval, False)
    assert interval == 200.0


def test_a_row_pushed_back_is_due_again_one_interval_later():
    row = advance(None, fetched(T0, "sha1:A"), FIXED)
    assert row is not None
    pushed_at = T0 + timedelta(seconds=500)
    assert due_after_push(row, pushed_at) == pushed_at + timedelta(seconds=100)
    slow = row._replace(interval=86400.0)
    assert due_after_push(slow, pushed_at) == pushed_at + timedelta(days=1)
