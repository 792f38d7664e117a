"""Which row an item is: its type and its key.

The ``items`` table is unique on ``(spider, item_type, item_key)``, so a
replayed page (a worker killed after storing items, before its ack) or a
page fetched again updates its rows instead of adding rows. An item's type
is its class name (``dict`` for a plain dict). Its key is:

- the values of the fields ``ITEM_KEYS`` names for its type
  (``{"ProductItem": ["sku"]}``): the text itself for one text field, else
  the compact JSON of the values;
- otherwise, the request fingerprint of the page it came from plus its
  position among that page's items of the same type (``<fingerprint>:<n>``):
  ten products on one listing page are ten rows, and the same page scraped
  again yields the same ten keys. An item of no page (yielded by ``start()``)
  has nothing to be identified by: it gets a random key, a row of its own.

Positions are counted where the spider's output leaves the spider
middlewares (:class:`PagePositions`), in the order the callback yielded
them, so item pipelines that wait (and finish out of order) do not change
them.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson
from itemadapter import ItemAdapter
from scrapy.crawler import Crawler
from scrapy.http import Response
from scrapy.settings import BaseSettings
from scrapy.spidermiddlewares.base import BaseSpiderMiddleware

from spiders_project.config import SettingsReader
from spiders_project.plumbing.wiring import shared


class MissingKey(ValueError):
    """An item without a value for a field ITEM_KEYS declares for its type."""


@dataclass(frozen=True)
class ItemKeys:
    """``ITEM_KEYS``: item type name -> the fields that identify an item of that type."""

    fields: Mapping[str, tuple[str, ...]]

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> ItemKeys:
        read = SettingsReader(settings)
        raw = read.getdict("ITEM_KEYS")
        fields: dict[str, tuple[str, ...]] = {}
        for name, names in raw.items():
            if isinstance(names, str):
                names = [names]
            if (
                not isinstance(name, str)
                or not isinstance(names, list | tuple)
                or not names
                or not all(isinstance(n, str) and n for n in names)
            ):
                read.fail("ITEM_KEYS", f"{name!r} must map to a non-empty list of field names")
            fields[name] = tuple(names)
        return cls(fields)

    def key_of(self, item: Any, item_type: str) -> str | None:
        """The declared key of ``item``, or None when its type declares none.

        Raises :class:`MissingKey` when a declared field has no value.
        """
        names = self.fields.get(item_type)
        if names is None:
            return None
        adapter = ItemAdapter(item)
        values = []
        for name in names:
            value = adapter.get(name)
            if value is None or value == "":
                raise MissingKey(f"{item_type} has no value for its key field {name!r} (ITEM_KEYS)")
            values.append(value)
        if len(values) == 1 and isinstance(values[0], str):
            return values[0]
        key = values[0] if len(values) == 1 else values
        return orjson.dumps(key, default=str, option=orjson.OPT_NON_STR_KEYS).decode()


def item_type_of(item: Any) -> str:
    """The class name of an item, as ``item_type`` stores it and ITEM_KEYS names it."""
    return type(item).__name__


class _Page:
    """The items one response yielded, by identity, with their positions."""

    __slots__ = ("counts", "positions")

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        # id(item) -> (item, position); the item is held so its id stays its own.
        self.positions: dict[int, tuple[Any, int]] = {}

    def number(self, item: Any, item_type: str) -> int:
        position = self.counts.get(item_type, 0)
        self.counts[item_type] = position + 1
        return position


class PagePositions(BaseSpiderMiddleware):
    """Numbers each item a response yields, per type, in the order it was yielded."""

    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        self._pages: weakref.WeakKeyDictionary[Any, _Page] = weakref.WeakKeyDictionary()
        # Types ITEM_KEYS identifies by their fields need no position.
        self._keyed = frozenset(ItemKeys.from_settings(crawler.settings).fields)

    @classmethod
    def of(cls, crawler: Crawler) -> PagePositions:
        return shared(crawler, cls, lambda: cls(crawler))

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> PagePositions:
        return cls.of(crawler)

    def get_processed_item(self, item: Any, response: Response | None) -> Any:
        if response is not None and type(item).__name__ not in self._keyed:
            page = self._pages.get(response)
            if page is None:
                page = self._pages[response] = _Page()
            page.positions[id(item)] = (item, page.number(item, item_type_of(item)))
        return item

    def position(self, item: Any, response: Any) -> int:
        """The position ``item`` was given on ``response``.

        An item a pipeline replaced by another object was not numbered: it
        gets the next position of its type on that page, in the order the
        pipelines finish.
        """
        page = self._pages.get(response)
        if page is None:
            page = self._pages[response] = _Page()
        found = page.positions.pop(id(item), None)
        if found is not None and found[0] is item:
            return found[1]
        return page.number(item, item_type_of(item))


def page_fingerprint(crawler: Crawler, response: Any) -> str | None:
    """Hex request fingerprint of the page (a response, or an errback's failure) an item
    came from; None when it came from none."""
    request = getattr(response, "request", None)
    if request is None:
        return None
    assert crawler.request_fingerprinter is not None
    return crawler.request_fingerprinter.fingerprint(request).hex()
