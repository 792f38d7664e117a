"""When Chromium restarts, and the wait for its pages in flight before it does.

The handler owns the browser (scrapy-playwright's attributes are its own);
this decides when to restart it and makes new pages wait meanwhile:

- :class:`~.recycle.Recycler` names the context of each new page and says
  when the browser has had its share of pages (``RENDER_PAGES_PER_BROWSER``);
- :class:`~.health.BrowserHealth` says when it grew too big
  (``RENDER_MAX_RSS_MB``, read every ``MEMORY_EVERY`` seconds by
  :meth:`BrowserRestarts.watch_memory`) or too slow (``RENDER_SLOWDOWN_FACTOR``);
- a restart that is due waits until the pages in flight are done, one
  restart at a time, and then calls the handler's ``restart``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from scrapy.statscollectors import StatsCollector

from spiders_project.plumbing.tasks import spawn_loop, stop_tasks
from spiders_project.rendering.config import RenderConfig
from spiders_project.rendering.health import MEMORY_EVERY, BrowserHealth, browser_rss_mb
from spiders_project.rendering.recycle import Recycler

logger = logging.getLogger(__name__)


class BrowserRestarts:
    """Contexts for new pages, and the browser restarts that are due.

    ``restart`` closes the browser and starts over (the handler's, with
    :meth:`new_browser` among what it does); ``running`` says whether a
    browser is up (the memory watch has nothing to read otherwise).
    """

    def __init__(
        self,
        render: RenderConfig,
        stats: StatsCollector,
        restart: Callable[[], Awaitable[None]],
        running: Callable[[], bool],
    ) -> None:
        self.recycler = Recycler(render.pages_per_context, render.pages_per_browser)
        self.health = BrowserHealth(render.max_rss_mb, render.slowdown)
        self.stats = stats
        self._restart = restart
        self._running = running
        self._lock = asyncio.Lock()
        self._watch: asyncio.Task[None] | None = None

    async def next_context(self) -> str:
        """The context for a new page; restarts the browser first when it is due."""
        await self._restart_if_due()
        return self.recycler.acquire()

    def page_done(self, context: str) -> bool:
        """A page of ``context`` is done; True if the context is retired and unused:
        the caller closes it."""
        return self.recycler.release(context)

    def rendered(self, seconds: float) -> None:
        """A page rendered in ``seconds``: restart the browser soon if it got far slower."""
        slow = self.health.rendered(seconds)
        if slow is not None:
            self.restart_soon("slowdown", slow)

    @property
    def due_because(self) -> tuple[str, str]:
        """(kind, reason) of the restart that is due (see ``Recycler.due_because``)."""
        return self.recycler.due_because

    def new_browser(self) -> None:
        """The browser was restarted or is gone: its contexts, counts and pace start over."""
        self.recycler.browser_restarted()
        self.health.restarted()

    def restart_soon(self, kind: str, reason: str) -> None:
        """Ask for a restart of the browser once its pages in flight are done."""
        if self.recycler.request_restart(kind, reason):
            logger.info(
                "Chromium will restart once its %d pages in flight are done: %s",
                self.recycler.in_flight,
                reason,
            )

    async def _restart_if_due(self) -> None:
        """Restart the browser if it is due, once its pages in flight are done
        (new pages wait for the new browser meanwhile)."""
        if self.recycler.browser_due():
            async with self._lock:
                if self.recycler.browser_due():
                    await self.recycler.drained.wait()
                    await self._restart()

    def watch_memory(self) -> None:
        """Start the memory watch (once, and only with ``RENDER_MAX_RSS_MB`` set)."""
        if self.health.max_rss_mb and self._watch is None:
            self._watch = spawn_loop("browser memory watch", self._watch_memory())

    async def stop(self) -> None:
        await stop_tasks([self._watch] if self._watch is not None else [])

    async def _watch_memory(self) -> None:
        """Every MEMORY_EVERY seconds, the browser's size against RENDER_MAX_RSS_MB;
        an idle browser found too big is restarted at once (the next page starts
        a new one), a busy one once its pages are done."""
        while True:
            await asyncio.sleep(MEMORY_EVERY)
            if not self._running():
                continue
            rss = await asyncio.to_thread(browser_rss_mb)
            self.stats.max_value("render/max_browser_rss_mb", round(rss))
            too_big = self.health.too_big(rss)
            if too_big is not None and not self.recycler.browser_due():
                self.restart_soon("memory", too_big)
            if self.recycler.browser_due() and self.recycler.drained.is_set():
                await self._restart_if_due()
