"""Items to a Redis item buffer, for the db_writers, after every item pipeline.

This replaces scrapy-redis' ``RedisPipeline``, which 0.9.1 runs as an item
pipeline: an RPUSH per item from a thread, dropping the item when Redis is
away. As a pipeline it also runs before any pipeline ordered after it, never
sees the page an item came from (so it cannot give the item an identity),
and disappears from a spider that sets its own ``ITEM_PIPELINES``. Here an
extension hears ``item_scraped``, which Scrapy sends once every pipeline
kept the item: a dropped item never reaches the buffer. The entry goes to the
worker's write batcher, in the same transaction as the acknowledgement of
the page it came from, and is kept in memory while Redis is unreachable.
The buffer is ``<spider>:items``; on a sharded frontier (Redis Cluster) a
page's items go to the buffer of its lease's shard, ``{<spider>/<n>}:items``,
on the master of its host (``frontier/page_shards.py``).

An entry is one JSON object::

    {"type": "ProductItem", "key": "sku-1", "url": "https://...", "at": "2026-...Z",
     "item": {...the item's fields...}}

``url`` is the item's own ``url`` field (null without one), ``at`` the time
the item left the pipelines (the row's ``scraped_at`` unless the item has a
``fetched_at``). An item whose declared key field is empty is buffered with
``"key": null`` and the reason, and the db_writer sets it aside in
``<spider>:items:rejected``. An item JSON cannot hold goes there at once.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

import orjson
from itemadapter import ItemAdapter
from scrapy import signals
from scrapy.crawler import Crawler
from scrapy.statscollectors import StatsCollector
from scrapy.utils.serialize import ScrapyJSONEncoder

from spiders_project.frontier.context import WorkerRedis
from spiders_project.frontier.page_shards import PageShards
from spiders_project.item_buffer.identity import (
    ItemKeys,
    MissingKey,
    PagePositions,
    item_type_of,
    page_fingerprint,
)

logger = logging.getLogger(__name__)

# orjson writes str, int, float, bool, None, lists and dicts itself; Scrapy's
# encoder takes the rest (Items, dataclasses, datetimes, Decimal, sets, ...),
# so a stored item reads as it would in a plain Scrapy run's JSON feed.
_FALLBACK = ScrapyJSONEncoder().default
_OPTIONS = (
    orjson.OPT_NON_STR_KEYS | orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS
)


def encode_entry(
    item: Any, item_type: str, key: str | None, at: str, why: str | None = None
) -> bytes:
    """The buffer entry of ``item``; raises TypeError for a value JSON cannot hold."""
    fields = ItemAdapter(item).asdict()
    url = fields.get("url")
    entry: dict[str, Any] = {
        "type": item_type,
        "key": key,
        "url": url if isinstance(url, str) else None,
        "at": at,
        "item": fields,
    }
    if why is not None:
        entry["why"] = why
    try:
        return orjson.dumps(entry, default=_FALLBACK, option=_OPTIONS)
    except orjson.JSONEncodeError as exc:
        raise TypeError(str(exc)) from None


class ItemBuffer:
    """Hands every scraped item, with its type and key, to the worker's write batcher."""

    def __init__(
        self,
        crawler: Crawler,
        redis: WorkerRedis,
        keys: ItemKeys,
        positions: PagePositions,
        stats: StatsCollector,
        shards: PageShards,
    ) -> None:
        self.crawler = crawler
        self.redis = redis
        self.keys = keys
        self.positions = positions
        self.stats = stats
        self.shards = shards

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ItemBuffer:
        assert crawler.stats is not None
        buffer = cls(
            crawler,
            WorkerRedis.of(crawler),
            ItemKeys.from_settings(crawler.settings),
            PagePositions.of(crawler),
            crawler.stats,
            PageShards.of(crawler),
        )
        crawler.signals.connect(buffer.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(buffer.item_scraped, signal=signals.item_scraped)
        return buffer

    async def spider_opened(self) -> None:
        # The db_writer's --all-spiders finds the spiders with items here.
        await self.redis.register_spider()

    def item_scraped(self, item: Any, response: Any) -> None:
        item_type = item_type_of(item)
        # Redis' clock, not this node's: the newer of two rows wins in the database.
        now = self.redis.time.now_datetime().isoformat(timespec="microseconds")
        why = None
        try:
            key = self.keys.key_of(item, item_type)
        except MissingKey as exc:
            key, why = None, str(exc)
        if key is None and why is None:
            page = page_fingerprint(self.crawler, response)
            if page is None:
                # An item from start(), of no page: nothing to identify it by
                # but itself, so it is a row of its own, never merged.
                key = f"nopage:{uuid.uuid4().hex}"
            else:
                key = f"{page}:{self.positions.position(item, response)}"
        try:
            entry = encode_entry(item, item_type, key, now, why)
        except TypeError as exc:
            self._unstorable(item, item_type, response, str(exc))
            return
        self.redis.batcher.item(entry, self.shards.of_request(getattr(response, "request", None)))

    def _unstorable(self, item: Any, item_type: str, response: Any, reason: str) -> None:
        """Keep an item JSON cannot hold in items:rejected, with its repr, and go on."""
        rejected = self.redis.keys.items_rejected
        url = getattr(response, "url", None)
        logger.error(
            "Item %s from %s cannot be stored as JSON (%s); kept in %s",
            item_type,
            url,
            reason,
            rejected,
        )
        self.stats.inc_value("items/unserializable")
        text = orjson.dumps(
            {"type": item_type, "page": url, "why": reason, "item": repr(item)[:10_000]}
        )
        self.redis.batcher.push(rejected, text)
