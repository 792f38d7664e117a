"""The header-and-item entry format: what the db_writer makes of it, good or bad, beside
the JSON entries of the previous releases, and what the monitor's lag reads of it."""

from __future__ import annotations

from datetime import UTC, datetime

import orjson
import pytest

from spiders_project.db_writer.entries import dedupe, parse_entries
from spiders_project.item_buffer.buffer import encode_entry
from spiders_project.keys.item_entries import encode_raw, split_raw
from spiders_project.read_model.writers import item_lag
from spiders_project.recrawl.pages_row import PageEntry, page_entry

AT = "2026-11-24T10:00:00.000000+00:00"
LATER = "2026-11-24T11:00:00.000000+00:00"


def raw(key: str, at: str = AT, item: bytes = b'{"v":1}', url: str | None = "https://a.test/"):
    entry = encode_raw("ProductItem", key, url, at, item)
    assert entry is not None
    return entry


def test_the_item_json_passes_through_as_the_rows_data():
    item = orjson.dumps({"sku": "s1", "price": 1.5, "name": "caf\u00e9 \u2603", "n": None})
    rows, rejected = parse_entries([raw("s1", item=item)], {"ProductItem": "products"})
    assert rejected == []
    [row] = rows
    assert row[:6] == ("products", "ProductItem", "s1", "https://a.test/", item.decode(), AT)
    assert row.raw == raw("s1", item=item)
    assert parse_entries([raw("s1", url=None)])[0][0].url is None


@pytest.mark.parametrize("store_checks_json", [True, False])
def test_all_three_formats_in_one_batch_and_newer_wins_across_them(store_checks_json: bool):
    json_entry = encode_entry({"sku": "s1", "v": 1}, "ProductItem", "s1", LATER)
    legacy = orjson.dumps({"url": "https://old.test/", "fetched_at": AT})
    page = page_entry("https://p.test/", "default", AT, "fetched", status=200)
    entries = [json_entry, raw("s1", at=AT, item=b'{"v":0}'), legacy, page, raw("s2")]
    pages: list[PageEntry] = []
    rows, rejected = parse_entries(entries, None, pages, store_checks_json)
    assert rejected == [] and [p.raw for p in pages] == [page]
    kept = {row.item_key: row for row in dedupe(rows)}
    assert sorted(kept) == ["https://old.test/", "s1", "s2"]
    assert orjson.loads(kept["s1"].data) == {"sku": "s1", "v": 1}  # the JSON entry is newer
    assert kept["https://old.test/"].item_type == "PageItem"


def test_a_time_not_in_the_canonical_form_is_read_or_replaced():
    [row] = parse_entries([raw("k", at="2026-11-24T12:00:00+01:00")])[0]
    assert row.scraped_at == "2026-11-24T11:00:00.000000+00:00"
    before = datetime.now(UTC).isoformat(timespec="microseconds")
    [row] = parse_entries([raw("k", at="yesterday")])[0]
    assert row.scraped_at >= before


BAD = {
    b"\x01ProductItem\x00k\x00https://a.test/": "header of 2 fields",
    b"\x01ProductItem": "header of 0 fields",
    b"\x01": "header of 0 fields",
    b"\x01\xff\xfe\x00k\x00\x00" + AT.encode() + b'\x00{"v":1}': "a header not UTF-8",
    b"\x01ProductItem\x00\x00\x00" + AT.encode() + b'\x00{"v":1}': "'key' is empty",
    b"\x01\x00k\x00\x00" + AT.encode() + b'\x00{"v":1}': "'type' is empty",
    b"\x01" + b"T" * 201 + b"\x00k\x00\x00" + AT.encode() + b'\x00{"v":1}': "longer than 200",
    raw("k", item=b'{"v":1'): "not a JSON object (cut short?)",
    raw("k", item=b"[1]"): "not a JSON object",
    raw("k", item=b""): "not a JSON object",
}


def test_a_bad_entry_is_rejected_with_its_reason_and_the_others_kept():
    entries = [raw("before"), *BAD, raw("after")]
    rows, rejected = parse_entries(entries)
    assert [row.item_key for row in rows] == ["before", "after"]
    assert [r.raw for r in rejected] == list(BAD)
    for entry, reason in zip(rejected, BAD.values(), strict=True):
        assert reason.lower() in entry.reason.lower(), entry.reason
        assert "\n" not in entry.reason and entry.preview()


def test_json_inside_the_braces_is_checked_unless_the_database_checks_it():
    bad = raw("k", item=b'{"v": nope}')
    rows, rejected = parse_entries([bad, raw("good")])
    assert [row.item_key for row in rows] == ["good"]
    assert [r.raw for r in rejected] == [bad] and "not valid JSON" in rejected[0].reason
    # PostgreSQL's JSONB checks it: the row goes to the store, which refuses it alone.
    rows, rejected = parse_entries([bad, raw("good")], store_checks_json=True)
    assert [row.item_key for row in rows] == ["k", "good"] and rejected == []


def test_a_header_field_that_cannot_be_carried_falls_back_to_the_json_entry():
    assert encode_raw("T", "k\x00", None, AT, b"{}") is None
    assert encode_raw("T", "k", "https://a.test/\x00", AT, b"{}") is None
    assert encode_raw("T", "k", "", AT, b"{}") is None
    assert split_raw(raw("k", url=None)) == ("ProductItem", "k", None, AT, b'{"v":1}')


def test_the_monitors_lag_reads_both_formats():
    now = datetime.fromisoformat(LATER).timestamp()
    json_entry = encode_entry({"v": 1}, "T", "k", LATER)
    assert item_lag(now, [raw("k")], [json_entry]) == pytest.approx(3600)
    assert item_lag(now, [], [b"\x01cut"]) is None
