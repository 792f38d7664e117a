"""The cap on rendered pages per worker (``RENDER_CONCURRENCY``), shared by the
middleware that takes a slot and the handler that gives it back.

The slot is taken in :class:`~spiders_project.rendering.rules.RenderMiddleware`,
before ``HostGateMiddleware`` grants the host's cluster-wide turn. A request
waiting for the browser therefore waits *before* its turn is granted, and
rendered requests keep the cluster's per-host delay. If they waited after the
gate, two turns granted a delay apart could reach the site together once
slots free up.
"""

from __future__ import annotations

import asyncio
import weakref

from scrapy import Request
from scrapy.crawler import Crawler

from spiders_project.plumbing.wiring import shared


class RenderSlots:
    """At most ``size`` requests hold a slot, from acquire() to release().

    ``release`` is idempotent and is called wherever a download can end: the
    handler (always, once it has the request), and the middleware's
    ``process_response``/``process_exception`` (a later middleware answered
    or failed first). A request dropped without any of these gives its slot
    back when it is garbage-collected.
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self._semaphore = asyncio.Semaphore(size)
        self._held: dict[int, weakref.finalize[[int], Request]] = {}

    @classmethod
    def of(cls, crawler: Crawler, size: int) -> RenderSlots:
        """The crawler's slots; asking for another ``size`` than the first caller is an error."""
        return shared(crawler, cls, lambda: cls(size), size)

    def holds(self, request: Request) -> bool:
        return id(request) in self._held

    @property
    def in_use(self) -> int:
        return len(self._held)

    async def acquire(self, request: Request) -> None:
        if self.holds(request):
            return
        await self._semaphore.acquire()
        key = id(request)
        self._held[key] = weakref.finalize(request, self._forget, key)

    def release(self, request: Request) -> None:
        finalizer = self._held.pop(id(request), None)
        if finalizer is not None:
            finalizer.detach()
            self._semaphore.release()

    def _forget(self, key: int) -> None:
        if self._held.pop(key, None) is not None:
            self._semaphore.release()
