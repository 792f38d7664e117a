"""Item classes of a user's project, for the unit tests of the item buffer and its identities."""

from __future__ import annotations

import dataclasses
from datetime import date

import scrapy


class ProductItem(scrapy.Item):
    sku = scrapy.Field()
    shop = scrapy.Field()
    price = scrapy.Field()


@dataclasses.dataclass
class Row:
    n: int
    day: date
