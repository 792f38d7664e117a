"""db_writer/pages.py: page-state entries parsed, and each URL's row advanced by them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import orjson
import pytest

from spiders_project.config import ConfigError, load_settings
from spiders_project.db_writer.entries import parse_entries
from spiders_project.db_writer.pages import BadPageEntry, PageEntry, PageRow, advance, parse_page
from spiders_project.db_writer.revisits import revisit_seed
from spiders_project.db_writer.writer import WriterConfig
from spiders_project.recrawl.config import RecrawlConfig
from spiders_project.recrawl.middleware import page_entry
from spiders_project.scope.seeds import InvalidSeed, parse_seed

T0 = datetime(2026, 11, 24, 10, 0, tzinfo=UTC)
URL = "https://example.com/p/1"
FIXED = RecrawlConfig(after=100.0)
ADAPTIVE = RecrawlConfig(after=100.0, adaptive=True, min_interval=10.0, max_interval=1000.0)


def entry(at: datetime, outcome: str = "fetched", **fields: object) -> PageEntry:
    raw = page_entry(URL, "default", at.isoformat(), outcome, **fields)  # type: ignore[arg-type]
    return parse_page(orjson.loads(raw), raw)


def fetched(at: datetime, digest: str, etag: str | None = None) -> PageEntry:
    return entry(at, status=200, digest=digest, etag=etag)


def test_the_worker_s_entry_parses_back():
    got = entry(T0, status=200, digest="sha1:A", etag='"1"', last_modified="Tue")
    assert (got.url, got.job, got.at, got.outcome, got.status) == (
        URL,
        "default",
        T0,
        "fetched",
        200,
    )
    assert (got.etag, got.last_modified, got.digest) == ('"1"', "Tue", "sha1:A")


@pytest.mark.parametrize(
    ("at", "text", "moment"),
    [
        # What workers write: kept as the text SQLite stores.
        ("2026-11-24T10:00:00.000001+00:00", "2026-11-24T10:00:00.000001+00:00", T0),
        # Anything else is formatted again from the parsed time: no microseconds,
        # another offset, no offset (UTC), a space.
        ("2026-11-24T10:00:00+00:00", "", T0),
        ("2026-11-24T12:00:00.000001+02:00", "", T0),
        ("2026-11-24T10:00:00.000001", "", T0),
        ("2026-11-24 10:00:00.000001+00:00", "", T0),
    ],
)
def test_the_time_of_an_entry_is_kept_as_text_only_in_the_stored_form(at, text, moment):
    got = parse_page({"kind": "page", "url": URL, "at": at, "outcome": "fetched"}, b"")
    assert got.at_text == text
    assert got.at.tzinfo is UTC and abs(got.at - moment) < timedelta(milliseconds=1)
    if text:
        assert got.at.isoformat(timespec="microseconds") == text


@pytest.mark.parametrize(
    "obj",
    [
        {"kind": "page", "at": T0.isoformat(), "outcome": "fetched"},
        {"kind": "page", "url": URL, "at": T0.isoformat(), "outcome": "eaten"},
        {"kind": "page", "url": URL, "at": "yesterday", "outcome": "fetched"},
        {"kind": "page", "url": URL, "at": T0.isoformat(), "outcome": "fetched", "status": "200"},
        {"kind": "page", "url": URL, "at": T0.isoformat(), "outcome": "fetched", "etag": 5},
        {"kind": "page", "url": "a\x00b", "at": T0.isoformat(), "outcome": "fetched"},
    ],
)
def test_malformed_entries_are_refused(obj):
    with pytest.raises(BadPageEntry):
        parse_page(obj, orjson.dumps(obj))


def test_parse_entries_routes_page_entries_and_rejects_the_bad_ones():
    good = page_entry(URL, "default", T0.isoformat(), "fetched", status=200)
    bad = b'{"kind": "page", "url": 5}'
    item = b'{"type": "T", "key": "k", "url": null, "at": null, "item": {}}'
    pages: list[PageEntry] = []
    rows, rejected = parse_entries([good, bad, item], None, pages)
    assert [p.raw for p in pages] == [good]
    assert [r.item_key for r in rows] == ["k"]
    assert [r.raw for r in rejected] == [bad]
    # A writer that keeps no pages table rejects them.
    rows, rejected = parse_entries([good], None, None)
    assert rows == [] and [r.raw for r in rejected] == [good]


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


def test_a_due_row_goes_back_as_a_seed_the_seed_reader_takes():
    row = advance(None, fetched(T0, "sha1:A", '"1"'), FIXED)
    assert row is not None
    seed = parse_seed(revisit_seed(row))
    assert (seed.url, seed.job, seed.revisit) == (URL, "default", row.page_state())
    other = parse_seed(revisit_seed(row._replace(job="nightly")))
    assert other.job == "nightly"


@pytest.mark.parametrize(
    "revisit",
    [[], {"etag": 5}, {"bogus": 1}, {"etag": "a\r\nX: y"}, {"interval": -5}],
)
def test_a_seed_with_a_bad_revisit_is_refused_with_its_reason(revisit):
    with pytest.raises(InvalidSeed, match="revisit"):
        parse_seed(orjson.dumps({"url": URL, "revisit": revisit}))


def test_item_tables_may_not_name_the_pages_table():
    with pytest.raises(ConfigError, match="^ITEM_TABLES=.*own table of page states"):
        WriterConfig.from_settings(load_settings({"ITEM_TABLES": '{"PageItem": "pages"}'}))
