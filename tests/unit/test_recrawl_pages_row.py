"""recrawl/pages_row.py: the worker's page entry parsed back, and a row's revisit seed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import orjson
import pytest

from spiders_project.recrawl.config import RecrawlConfig
from spiders_project.recrawl.pages_row import (
    BadPageEntry,
    PageEntry,
    page_entry,
    parse_page,
    revisit_seed,
)
from spiders_project.recrawl.revisit_rules import advance
from spiders_project.scope.seeds import InvalidSeed, parse_seed

T0 = datetime(2026, 11, 24, 10, 0, tzinfo=UTC)
URL = "https://example.com/p/1"
FIXED = RecrawlConfig(after=100.0)


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
