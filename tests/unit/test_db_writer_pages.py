"""db_writer: page entries routed out of <spider>:items, and the pages table's name kept."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from spiders_project.config import ConfigError, load_settings
from spiders_project.db_writer.entries import parse_entries
from spiders_project.db_writer.writer import WriterConfig
from spiders_project.recrawl.pages_row import PageEntry, page_entry

T0 = datetime(2026, 11, 24, 10, 0, tzinfo=UTC)
URL = "https://example.com/p/1"


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


def test_item_tables_may_not_name_the_pages_table():
    with pytest.raises(ConfigError, match="^ITEM_TABLES=.*own table of page states"):
        WriterConfig.from_settings(load_settings({"ITEM_TABLES": '{"PageItem": "pages"}'}))
