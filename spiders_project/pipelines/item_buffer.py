"""Items to the Redis list ``<spider>:items``, for the db_writer."""

from __future__ import annotations

from typing import Any

from scrapy.crawler import Crawler
from scrapy.utils.serialize import ScrapyJSONEncoder
from scrapy_redis.pipelines import RedisPipeline

from spiders_project.frontier.context import WorkerRedis
from spiders_project.scrapy_redis_compat import not_here


# scrapy-redis ships no types, so its pipeline is Any to mypy.
class ItemBufferPipeline(RedisPipeline):  # type: ignore[misc]
    """scrapy-redis' RedisPipeline without its thread and its deprecated arguments.

    0.9.1 does a blocking RPUSH per item in a thread (``deferToThread``),
    returns a Deferred and takes ``spider`` (both deprecated in Scrapy 2.19),
    and drops the item when Redis is away. Here the JSON goes to the worker's
    write batcher: it is sent in the same transaction as the acknowledgement of
    the page it came from, and kept in memory while Redis is unreachable.
    """

    def __init__(self, redis: WorkerRedis) -> None:
        encoder = ScrapyJSONEncoder(ensure_ascii=False, separators=(",", ":"))
        super().__init__(redis.client, key=redis.keys.items, serialize_func=encoder.encode)
        self.redis = redis

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ItemBufferPipeline:
        return cls(WorkerRedis.of(crawler))

    # 0.9.1's blocking RPUSH, meant for a thread; on the asyncio client it
    # would return a coroutine nobody awaits and lose the item.
    _process_item = not_here(
        "RedisPipeline._process_item", "process_item hands items to the write batcher"
    )

    def process_item(self, item: Any) -> Any:
        self.redis.batcher.item(self.serialize(item).encode())
        return item
