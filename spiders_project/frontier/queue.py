"""The shared priority queue of requests, as JSON, with leases."""

from __future__ import annotations

from typing import Any

from scrapy import Request, Spider
from scrapy.utils.request import request_from_dict
from scrapy_redis.queue import Base

from spiders_project.frontier.calls import MAX_PRIORITY
from spiders_project.frontier.codec import callbacks, serialize
from spiders_project.frontier.codec.serialize import InvalidEntry
from spiders_project.frontier.codec.values import ValueCodec
from spiders_project.insides.scrapy_redis_compat import not_here

# A callback that is not a method of the spider, left to Scrapy to name (or refuse).
_UNNAMED = object()


class JsonPriorityQueue(Base):  # type: ignore[misc]  # scrapy-redis ships no types
    """scrapy-redis' queue interface over a sorted set of JSON requests.

    Differences from ``scrapy_redis.queue.PriorityQueue``, and why:
    - JSON instead of pickle, so nothing read from Redis is executed.
    - First-in first-out within a priority (the stock queue orders ties by the
      bytes of the pickle, which is neither BFS nor DFS).
    - Pops are leases (``lua/lease.lua``), acknowledged once processed; a
      destructive pop loses the request when the worker dies.
    - Pushes and pops are batched by the scheduler on the asyncio client, so
      the synchronous ``push``/``pop`` of the base class are not used.
    - Callback names are checked both ways (:mod:`.callbacks`), and meta
      values go through the project's :class:`~.values.ValueCodec`.
    """

    def __init__(
        self,
        server: Any,
        spider: Spider,
        key: str,
        serializer: Any = None,
        values: ValueCodec | None = None,
    ) -> None:
        super().__init__(server, spider, key, serializer or serialize)
        self.values = values if values is not None else serialize.PLAIN

    def encode(self, request: Request) -> tuple[int, bytes]:
        """(clamped priority, JSON payload) of a request.

        Raises :class:`Unserializable` (meta or cb_kwargs) or
        :class:`InvalidEntry` (anything else) for a request it cannot store.
        """
        priority = max(-MAX_PRIORITY, min(MAX_PRIORITY, request.priority))
        return priority, self._encode_request(request)

    def _encode_request(self, request: Request) -> bytes:
        try:
            d = self._to_dict(request)
        except ValueError as exc:  # Scrapy: a callback that is not a spider method
            raise InvalidEntry(f"request {request.url} cannot be stored: {exc}") from None
        for name in ("callback", "errback"):
            if isinstance(d.get(name), str):
                why = callbacks.refusal(type(self.spider), d[name])
                if why is not None:
                    raise InvalidEntry(f"request {request.url} cannot be stored: {why}")
        data: bytes = self.serializer.dumps(d, self.values)
        return data

    def _to_dict(self, request: Request) -> dict[str, Any]:
        """``request.to_dict(spider=...)``, without its cost for spider-method callbacks.

        Scrapy names a callback by scanning every member of the spider with
        ``inspect.getmembers``, a cost per request that showed in the worker's
        profile (docs/BENCHMARKS.md). A bound method of our spider is named
        directly, after checking that the name resolves back to the same
        function; anything else goes through Scrapy's own ``to_dict``.
        """
        callback = self._method_name(request.callback)
        errback = self._method_name(request.errback)
        if callback is _UNNAMED or errback is _UNNAMED:
            return request.to_dict(spider=self.spider)
        d: dict[str, Any] = {
            "url": request.url,
            "callback": callback,
            "errback": errback,
            "headers": dict(request.headers),
        }
        for attr in request.attributes:
            d.setdefault(attr, getattr(request, attr))
        if type(request) is not Request:
            d["_class"] = f"{type(request).__module__}.{type(request).__name__}"
        return d

    def _method_name(self, func: Any) -> Any:
        """The spider attribute naming ``func``; ``func`` if not callable; else _UNNAMED."""
        if not callable(func):
            return func
        function = getattr(func, "__func__", None)
        if function is None or getattr(func, "__self__", None) is not self.spider:
            return _UNNAMED
        name = function.__name__
        if getattr(getattr(self.spider, name, None), "__func__", None) is not function:
            return _UNNAMED
        return name

    def decode(self, payload: bytes) -> Request:
        """The request stored as ``payload``; raises InvalidEntry if it is not ours."""
        try:
            return self._decode_request(payload)
        except InvalidEntry:
            raise
        except (TypeError, ValueError, KeyError) as exc:
            raise InvalidEntry(str(exc)) from None

    def _decode_request(self, encoded_request: bytes) -> Request:
        d = self.serializer.loads(encoded_request, self.values)
        for name in ("callback", "errback"):
            if d.get(name) is not None:
                why = callbacks.refusal(type(self.spider), d[name])
                if why is not None:
                    raise InvalidEntry(why)
        return request_from_dict(d, spider=self.spider)

    # The base class' synchronous methods would call the asyncio client
    # without awaiting it, and pop destructively; the scheduler does this work.
    _INSTEAD = "the FrontierScheduler enqueues, leases and clears in batches (lua/*.lua)"
    push = not_here("queue.Base.push", _INSTEAD)
    pop = not_here("queue.Base.pop", _INSTEAD)
    clear = not_here("queue.Base.clear", _INSTEAD)
    __len__ = not_here("queue.Base.__len__", "read <spider>:requests:size")
