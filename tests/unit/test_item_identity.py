"""An item's identity: its type, its declared key or its page and position; its buffer entry."""

from __future__ import annotations

import dataclasses
import json
from datetime import date, datetime
from decimal import Decimal

import pytest
import scrapy
from scrapy import Request
from scrapy.http import HtmlResponse
from scrapy.settings import Settings

from spiders_project.config import ConfigError
from spiders_project.item_buffer.buffer import encode_entry
from spiders_project.item_buffer.identity import (
    ItemKeys,
    MissingKey,
    PagePositions,
    item_type_of,
)
from spiders_project.spiders.distributed import DistributedSpider
from tests.support.crawlers import project_crawler


class ProductItem(scrapy.Item):
    sku = scrapy.Field()
    shop = scrapy.Field()
    price = scrapy.Field()


@dataclasses.dataclass
class Row:
    n: int
    day: date


def keys(value: object) -> ItemKeys:
    return ItemKeys.from_settings(Settings({"ITEM_KEYS": value}))


def test_declared_keys() -> None:
    item_keys = keys({"ProductItem": ["sku"], "Pair": ["shop", "sku"], "Num": "n"})
    assert item_keys.key_of(ProductItem(sku="S1"), "ProductItem") == "S1"
    assert item_keys.key_of({"shop": "a", "sku": 7}, "Pair") == '["a",7]'
    assert item_keys.key_of({"n": 3}, "Num") == "3"
    assert item_keys.key_of({"sku": "x"}, "dict") is None  # no key declared: page identity
    with pytest.raises(MissingKey, match="no value for its key field 'sku'"):
        item_keys.key_of(ProductItem(shop="a"), "ProductItem")
    with pytest.raises(MissingKey):
        item_keys.key_of(ProductItem(sku=""), "ProductItem")


@pytest.mark.parametrize("value", [{"ProductItem": []}, {"ProductItem": [1]}, {"X": None}])
def test_bad_item_keys_are_one_line(value: object) -> None:
    with pytest.raises(ConfigError, match="ITEM_KEYS=.*non-empty list of field names"):
        keys(value)


def test_the_bundled_page_item_is_keyed_by_url() -> None:
    crawler = project_crawler(DistributedSpider)
    assert ItemKeys.from_settings(crawler.settings).fields == {"PageItem": ("url",)}


def test_positions_count_per_page_and_type_in_yield_order() -> None:
    crawler = project_crawler(DistributedSpider)
    positions = PagePositions(crawler)
    page_a = HtmlResponse("http://e.com/a", body=b"", request=Request("http://e.com/a"))
    page_b = HtmlResponse("http://e.com/b", body=b"", request=Request("http://e.com/b"))
    items = [{"i": 0}, ProductItem(sku="1"), {"i": 1}, ProductItem(sku="2"), {"i": 2}]
    for item in items:
        positions.get_processed_item(item, page_a)
    other = {"i": 0}
    positions.get_processed_item(other, page_b)
    # Pipelines may finish in another order: the yield order is kept.
    assert [positions.position(item, page_a) for item in reversed(items)] == [2, 1, 1, 0, 0]
    assert positions.position(other, page_b) == 0
    # An item a pipeline replaced gets the next position of its type on its page.
    assert positions.position({"i": "new"}, page_a) == 3


def test_item_type_is_the_class_name() -> None:
    assert item_type_of({}) == "dict"
    assert item_type_of(ProductItem()) == "ProductItem"
    assert item_type_of(Row(1, date(2026, 1, 1))) == "Row"


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

    sent: list[bytes] = []
    buffer = ItemBuffer.from_crawler(crawler)
    buffer.redis.batcher.item = sent.append  # type: ignore[method-assign]
    buffer.item_scraped({"x": 1}, None)
    buffer.item_scraped({"x": 1}, None)
    keys = [json.loads(entry)["key"] for entry in sent]
    assert all(key.startswith("nopage:") for key in keys) and keys[0] != keys[1]
