"""The Playwright side of page reuse: which open page an attempt navigates, and
what becomes of it afterwards.

:class:`~.pages.PagePool` keeps the books (why pages are reused at all is
told there); :class:`PageReuse` acts on real pages around each attempt:

- before the download it lends the attempt an idle page of its context
  (scrapy-playwright navigates a page given in ``playwright_page`` and leaves
  it open when the request asks to include it);
- a page that rendered its URL goes back to the pool for the next one, its
  garbage collected while it waits; one that served its share of URLs, sat
  idle for ``RENDER_IDLE_PAGE_CLOSE`` seconds, crashed, or belonged to a
  failed or cancelled attempt is closed in the background and never lent again;
- a ``Page`` never travels with the request: retries and dead letters are
  stored as JSON.
"""

from __future__ import annotations

import asyncio
import weakref

from playwright.async_api import CDPSession, Page
from scrapy import Request
from scrapy.statscollectors import StatsCollector

from spiders_project.rendering.background import Background
from spiders_project.rendering.config import RenderConfig
from spiders_project.rendering.page_pool import PagePool


class PageReuse:
    """Idle pages lent to attempts and taken back (``RENDER_URLS_PER_PAGE`` > 1)."""

    def __init__(self, render: RenderConfig, stats: StatsCollector, background: Background):
        self.render = render
        self.stats = stats
        self.background = background
        self.pool: PagePool[Page] = PagePool(render.urls_per_page)
        # A DevTools session per reused page, for the garbage collection between URLs.
        self._devtools: weakref.WeakKeyDictionary[Page, CDPSession] = weakref.WeakKeyDictionary()

    @property
    def enabled(self) -> bool:
        return self.pool.enabled

    def lend(self, request: Request, context: str, pages: list[Page]) -> None:
        """Before a reusing attempt's download: an idle page of ``context``, if any,
        goes in the request's meta (and in the attempt's ``pages``), and the page
        it renders on stays open."""
        idle = self._idle_page(context)
        if idle is not None:
            self.stats.inc_value("render/pages_reused")
            pages.append(idle)
            request.meta["playwright_page"] = idle
        request.meta["playwright_include_page"] = True

    def take_back(self, request: Request, context: str, pages: list[Page]) -> None:
        """After a reusing attempt's download: the page that rendered it is healthy
        (and no longer among the attempt's ``pages``)."""
        page = request.meta.pop("playwright_page", None)
        if page in pages:
            pages.remove(page)
            self._give_back(context, page)

    def settle(self, request: Request, reused: bool, pages: list[Page]) -> None:
        """After any attempt, however it ended: no Page left in the request's meta
        if it ``reused`` pages (retries, dead letters), and the attempt's ``pages``
        not taken back (it failed or was cancelled) are never reused, and closed."""
        if reused:
            request.meta.pop("playwright_page", None)
            request.meta.pop("playwright_include_page", None)
        for page in pages:
            self.pool.forget(page)
            if not page.is_closed():
                self.background.run(page.close(), "closing a cancelled page")

    def crashed(self, page: Page) -> None:
        """A renderer died under one page (the browser lives on): never reuse it."""
        self.stats.inc_value("render/page_crashes")
        self.pool.forget(page)
        self.background.run(page.close(), "closing a crashed page")

    def drop(self, context: str) -> None:
        """``context`` is being closed: its idle pages close with it."""
        self.pool.drop(context)

    def clear(self) -> None:
        """The browser is restarting or gone: its pages with it."""
        self.pool.clear()

    def _idle_page(self, context: str) -> Page | None:
        while (page := self.pool.take(context)) is not None:
            if not page.is_closed():
                return page
            self.pool.forget(page)
        return None

    def _give_back(self, context: str, page: Page) -> None:
        """A page that rendered its URL: kept for the next one of its context, or closed."""
        loop = asyncio.get_running_loop()
        if page.is_closed():
            self.pool.forget(page)
        elif self.pool.give_back(context, page, loop.time()):
            loop.call_later(self.render.idle_page_close, self._close_if_idle, page)
            if self.render.gc_between_urls:
                self.background.run(self._collect_garbage(page), "collecting a page's garbage")
        else:
            self.background.run(page.close(), "closing a page that served its URLs")

    async def _collect_garbage(self, page: Page) -> None:
        """A full garbage collection in the page's renderer before its next URL.

        A reused page's renderer keeps what its documents allocated until V8
        decides to collect, so without this a reused page holds more memory
        than a new page per URL would. Collected while the page waits, it adds
        nothing to the page's render time (docs/BENCHMARKS.md, "Rendering" and
        "Figures moved out of code comments").
        """
        session = self._devtools.get(page)
        if session is None:
            session = await page.context.new_cdp_session(page)
            self._devtools[page] = session
        await session.send("HeapProfiler.collectGarbage")
        self.stats.inc_value("render/garbage_collections")

    def _close_if_idle(self, page: Page) -> None:
        """RENDER_IDLE_PAGE_CLOSE after ``page`` went idle: closed unless it is busy again."""
        # asyncio runs a timer up to its clock resolution early: a little slack.
        idle_for = self.render.idle_page_close * 0.99
        if self.pool.expire(page, asyncio.get_running_loop().time(), idle_for):
            self.stats.inc_value("render/idle_pages_closed")
            self.background.run(page.close(), "closing an idle page")
