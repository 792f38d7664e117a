"""Playwright's Node driver: started with the first rendered page, started again
when it exits.

A worker that only fetches plain HTTP never starts the driver, nor pays its
memory (docs/BENCHMARKS.md, "Rendering": a worker that renders nothing).
Once started, the driver can die under the worker (killed, out of memory);
Playwright's public API has no event for that, and without one every later
rendered page would fail until the worker restarts. Its private
connection to the driver emits "close", reached through
:mod:`spiders_project.insides.internals` (which raises InternalsMissing at the first
rendered page if it is gone): the handler then forgets the driver and its
browser, retries the pages in flight, and the next page starts a new driver
here.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable

from scrapy_playwright.provider import BrowserProvider

from spiders_project.insides import internals

logger = logging.getLogger(__name__)


class Driver:
    """Starts the driver once, until :meth:`exited`; ``launch`` starts it (the
    handler's, answering scrapy-playwright's provider) and ``gone(provider)``
    is called when that driver exits."""

    def __init__(
        self,
        node_options: str,
        launch: Callable[[], Awaitable[BrowserProvider]],
        gone: Callable[[BrowserProvider], None],
    ) -> None:
        self.node_options = node_options  # RENDER_DRIVER_NODE_OPTIONS
        self._launch = launch
        self._gone = gone
        self._lock = asyncio.Lock()
        self.started = False

    async def ensure_started(self, url: str) -> None:
        """Start the driver unless it runs; ``url`` is the page that needs it (logged)."""
        if self.started:
            return
        async with self._lock:
            if not self.started:
                logger.info("Starting the Playwright driver for a rendered page (%s)", url)
                # Playwright starts its driver with a copy of this process'
                # environment and takes no other: NODE_OPTIONS goes there.
                if self.node_options and "NODE_OPTIONS" not in os.environ:
                    os.environ["NODE_OPTIONS"] = self.node_options
                provider = await self._launch()
                self.started = True
                internals.on_driver_exit(
                    provider.playwright,
                    provider.playwright_context_manager,
                    lambda: self._gone(provider),
                )

    def exited(self) -> None:
        """The driver is gone: the next rendered page starts a new one."""
        self.started = False
