"""An item's buffer entry: the item as Scrapy's feeds write it, keyed (item_buffer/buffer.py)."""

from __future__ import annotations

import json
from datetime import date, datetime
from decimal import Decimal

import pytest

from spiders_project.frontier.lease_id import NO_SHARD
from spiders_project.item_buffer.buffer import encode_entry
from spiders_project.spiders.distributed import DistributedSpider
from tests.support.crawlers import project_crawler
from tests.support.items import ProductItem, Row


def test_an_entry_reads_as_scrapy_feeds_write_the_item() -> None:
    item = ProductItem(sku="S1", price=Decimal("1.50"), shop={"days": {date(2026, 1, 2)}})
    entry = json.loads(encode_entry(item, "ProductItem", "S1", "2026-11-24T00:00:00+00:00"))
    assert entry == {
        "type": "ProductItem",
        "key": "S1",
        "url": None,
        "at": "2026-11-24T00:00:00+00:00",
        "item": {"sku": "S1", "price": "1.50", "shop": {"days": ["2026-01-02"]}},
    }
    nested = json.loads(
        encode_entry(
            {
                "url": "http://e.com/",
                "row": Row(1, date(2026, 1, 2)),
                "at": datetime(2026, 1, 2, 3, 4, 5),
            },
            "dict",
            "fp:0",
            "t",
        )
    )
    assert nested["url"] == "http://e.com/"
    assert nested["item"]["row"] == {"n": 1, "day": "2026-01-02"}
    assert nested["item"]["at"] == "2026-01-02T03:04:05"  # as ScrapyJSONEncoder writes it


def test_an_item_json_cannot_hold_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        encode_entry({"lock": object()}, "dict", "fp:0", "t")


def test_an_item_of_no_page_is_a_row_of_its_own() -> None:
    crawler = project_crawler(DistributedSpider)
    from spiders_project.item_buffer.buffer import ItemBuffer

    sent: list[tuple[bytes, int]] = []
    buffer = ItemBuffer.from_crawler(crawler)
    buffer.redis.batcher.item = lambda entry, shard: sent.append((entry, shard))  # type: ignore[method-assign]
    buffer.item_scraped({"x": 1}, None)
    buffer.item_scraped({"x": 1}, None)
    keys = [json.loads(entry)["key"] for entry, _ in sent]
    assert all(key.startswith("nopage:") for key in keys) and keys[0] != keys[1]
    assert {shard for _, shard in sent} == {NO_SHARD}  # the spider's own buffer
