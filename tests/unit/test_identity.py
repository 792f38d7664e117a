"""An item's identity: its type, its declared key or its page and position."""

from __future__ import annotations

from datetime import date

import pytest
from scrapy import Request
from scrapy.http import HtmlResponse
from scrapy.settings import Settings

from spiders_project.config import ConfigError
from spiders_project.item_buffer.identity import (
    ItemKeys,
    MissingKey,
    PagePositions,
    item_type_of,
)
from spiders_project.spiders.distributed import DistributedSpider
from tests.support.crawlers import project_crawler
from tests.support.items import ProductItem, Row


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
