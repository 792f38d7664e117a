"""Closing pages and contexts without making a rendered request wait for it.

A page that served its URLs, sat idle, crashed or was cancelled, and a
context that was recycled, are closed while the next page renders: their
close is a round trip to Chromium that nobody needs the answer to. Each
close runs as a task of its own under ``CLOSE_TIMEOUT`` (a browser that
stopped answering must not leave tasks behind forever); a failure is logged
at debug level only, since the page or context is gone either way. The
handler waits for the closes in flight when the worker shuts down.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable

from playwright.async_api import Error as PlaywrightError

logger = logging.getLogger(__name__)

# Seconds one close of a page, a context or the browser may take.
CLOSE_TIMEOUT = 10.0


class Background:
    """Closes in flight, each under ``CLOSE_TIMEOUT``; waited for by :meth:`wait`."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[None]] = set()

    def run(self, awaitable: Awaitable[None], what: str) -> None:
        """Run ``awaitable`` (``what`` it does, for the log) without waiting for it."""

        async def run() -> None:
            try:
                await asyncio.wait_for(awaitable, CLOSE_TIMEOUT)
            except (PlaywrightError, TimeoutError) as exc:
                logger.debug("%s failed: %r", what, exc)

        task = asyncio.ensure_future(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def wait(self) -> None:
        """Until the closes in flight are done; each has its own timeout, so this ends."""
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=CLOSE_TIMEOUT)
