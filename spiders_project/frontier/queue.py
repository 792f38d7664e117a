"""The shared priority queue of requests, as JSON, with leases."""

from __future__ import annotations

from typing import Any

from scrapy import Request, Spider
from scrapy.utils.request import request_from_dict
from scrapy_redis.queue import Base

from spiders_project.frontier import serialize
from spiders_project.frontier.serialize import InvalidEntry

# The enqueue script keeps -priority * 2^40 + seq exact in a double.
MAX_PRIORITY = 4000


class JsonPriorityQueue(Base):
    """scrapy-redis' queue interface over a sorted set of JSON requests.

    Differences from ``scrapy_redis.queue.PriorityQueue``, and why:
    - JSON instead of pickle, so nothing read from Redis is executed.
    - First-in first-out within a priority (the stock queue orders ties by the
      bytes of the pickle, which is neither BFS nor DFS).
    - Pops are leases (``lua/lease.lua``), acknowledged once processed; a
      destructive pop loses the request when the worker dies.
    - Pushes and pops are batched by the scheduler on the asyncio client, so
      the synchronous ``push``/``pop`` of the base class are not used.
    """

    def __init__(self, server: Any, spider: Spider, key: str, serializer: Any = None) -> None:
        super().__init__(server, spider, key, serializer or serialize)

    def encode(self, request: Request) -> tuple[int, bytes]:
        """(clamped priority, JSON payload) of a request."""
        priority = max(-MAX_PRIORITY, min(MAX_PRIORITY, request.priority))
        return priority, self._encode_request(request)

    def decode(self, payload: bytes) -> Request:
        """The request stored as ``payload``; raises InvalidEntry if it is not ours."""
        try:
            return self._decode_request(payload)
        except InvalidEntry:
            raise
        except (TypeError, ValueError, KeyError) as exc:
            raise InvalidEntry(str(exc)) from None

    def _decode_request(self, encoded_request: bytes) -> Request:
        return request_from_dict(self.serializer.loads(encoded_request), spider=self.spider)

    def __len__(self) -> int:
        raise TypeError("use FrontierScheduler.queue_size(); the worker's client is asyncio")
