"""The two baselines of the benchmark, running the ``distributed`` spider's own ``parse``.

- :class:`PlainSpider`: plain Scrapy, in-memory scheduler and dupefilter, no Redis.
- :class:`StockRedisSpider`: stock scrapy-redis 0.9.1 as its README configures it
  (its Scheduler, PriorityQueue, RFPDupeFilter, pickle, RedisPipeline; the seed read
  by its RedisSpider).

Both borrow ``DistributedSpider.parse`` unchanged, so the three setups extract the
same items and links and differ only in scheduling, deduplication and item output.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import scrapy
from scrapy.crawler import Crawler
from scrapy.utils.serialize import ScrapyJSONEncoder
from scrapy_redis.spiders import RedisSpider

from spiders_project.crawl.hosts import host_of
from spiders_project.spiders.distributed import DistributedSpider


def _local_now() -> datetime:
    return datetime.now(UTC)


# DistributedSpider.parse stamps fetched_at with the worker's Redis clock
# (self.redis.time, plumbing/clock.py). Neither baseline has a WorkerRedis, so
# both stamp with the local clock: the same call, one datetime per item.
LOCAL_CLOCK = SimpleNamespace(time=SimpleNamespace(now_datetime=_local_now))


class PlainSpider(scrapy.Spider):
    """The distributed spider's logic on Scrapy's own scheduler."""

    name = "plain"
    parse = DistributedSpider.parse
    redis = LOCAL_CLOCK

    def __init__(self, url: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.url = url

    async def start(self) -> AsyncIterator[Any]:
        yield scrapy.Request(self.url, meta={"scope": host_of(self.url)})


class StockRedisSpider(RedisSpider):
    """The distributed spider's logic on stock scrapy-redis (seed from ``stock:start_urls``)."""

    name = "stock"
    parse = DistributedSpider.parse
    redis = LOCAL_CLOCK


class JsonItemPipeline:
    """Encodes each item as the worker's item pipeline does, then drops the bytes.

    Keeps plain Scrapy's per-item work equal to the worker's, minus Redis.
    """

    def __init__(self) -> None:
        self.encode = ScrapyJSONEncoder(ensure_ascii=False, separators=(",", ":")).encode

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> JsonItemPipeline:
        return cls()

    def process_item(self, item: Any) -> Any:
        self.encode(item).encode()
        return item
