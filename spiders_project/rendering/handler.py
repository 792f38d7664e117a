"""The download handler for ``http`` and ``https``: plain HTTP, or a page rendered in Chromium.

A subclass of scrapy-playwright's handler that keeps its page handling
(navigation, headers, redirects, downloads) and changes what a crawler that
runs for days needs changed:

- **Lazy**: Playwright's Node driver starts with the first page that needs
  rendering, not when the engine starts, so a worker that only fetches plain
  HTTP never pays for its memory (docs/BENCHMARKS.md, "Rendering": a worker
  that renders nothing).
- **One instance for both schemes**: one driver and one Chromium per worker,
  instead of one of each per scheme.
- **Bounded**: at most ``RENDER_CONCURRENCY`` pages render at once, whatever
  ``CONCURRENT_REQUESTS`` lets through for plain HTTP (:mod:`.slots`); contexts
  and the browser are recycled (:mod:`.recycle`), and the browser is restarted
  when its processes outgrow ``RENDER_MAX_RSS_MB`` or its pages get far slower
  than usual (:mod:`.health`), each time once its pages in flight are done
  (:mod:`.restarts`).
- **Pages reused**: an open page is navigated to the next URL of its context
  instead of being closed and opened again, which spares Chromium a renderer
  process per URL; its request interception stays on between URLs
  (:mod:`.page_interception`), its garbage is collected while it waits, and a page
  that failed, crashed or sat idle too long is closed (:mod:`.page_pool`,
  :mod:`.page_reuse`).
- **Never hangs**: each attempt runs under ``RENDER_DEADLINE``. When Chromium
  dies, every attempt in flight on it is cancelled at once (a ``new_page()``
  in flight at that moment would otherwise never return) and retried on the
  relaunched browser, up to ``RENDER_CRASH_RETRIES`` times (:mod:`.attempts`).
  The same happens when Playwright's Node driver dies: a new one is started
  (:mod:`.driver`).
- **Polite**: the host's cluster-wide turn (``HostGateMiddleware``'s gate) is
  taken again right before ``page.goto``, once the page exists
  (:mod:`spiders_project.politeness.turns`); time spent waiting for it is not
  counted in the deadline.
- **Shared cookies**: a page renders in a context of its cookie jar's, given
  the jar's cookies before it navigates; what the page set goes back into the
  jar (:mod:`.context_cookies`).
- **Waits for content**: network idle (bounded by ``RENDER_IDLE_TIMEOUT``) or
  the request's ``render_wait_selector``, instead of ``playwright_page_methods``
  (PageMethod objects cannot travel through the JSON frontier).

This class keeps what touches scrapy-playwright's own state (its browser,
driver provider and contexts) and overrides its hooks. The collaborators it
owns hold none of that state and reach it through callbacks of this class:
:mod:`.attempts` renders one request, :mod:`.restarts` decides when Chromium
restarts, :mod:`.page_reuse` lends and takes back pages, :mod:`.driver` starts
Playwright's driver, and :mod:`.background` closes what is no longer needed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from contextlib import suppress
from urllib.parse import urlsplit

from playwright.async_api import Browser, Page
from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Request as PlaywrightRequest
from playwright.async_api import Response as PlaywrightResponse
from playwright.async_api import TimeoutError as PlaywrightTimeoutError
from scrapy import Request, Spider
from scrapy.core.downloader.handlers.http11 import HTTP11DownloadHandler
from scrapy.crawler import Crawler
from scrapy.http import Response
from scrapy_playwright.handler import Download, ScrapyPlaywrightDownloadHandler
from scrapy_playwright.provider import BrowserProvider

from spiders_project.archive.sources import RenderedSources
from spiders_project.cookies.browser import TAKEN_FROM_BROWSER
from spiders_project.crawl.meta import GUARDED, RENDER_WAIT_SELECTOR
from spiders_project.plumbing.wiring import shared
from spiders_project.politeness.turns import HostTurns
from spiders_project.rendering.attempts import Attempts, current_attempt
from spiders_project.rendering.background import CLOSE_TIMEOUT, Background
from spiders_project.rendering.blocking import (
    AbortPredicate,
    ResourceBlocker,
    chain,
    with_switches,
)
from spiders_project.rendering.config import RenderConfig, executable_problem
from spiders_project.rendering.context_cookies import ContextCookies, in_generation
from spiders_project.rendering.driver import Driver
from spiders_project.rendering.page_interception import RouteSwitch
from spiders_project.rendering.page_reuse import PageReuse
from spiders_project.rendering.restarts import BrowserRestarts
from spiders_project.rendering.slots import RenderSlots
from spiders_project.scope.networks import NetworkGuard

logger = logging.getLogger(__name__)

# Our RENDER_CONCURRENCY semaphore is the page cap. scrapy-playwright's
# per-context semaphore loses a slot whenever new_page() is cancelled, so it
# must never be the one that blocks.
_UNLIMITED = 1_000_000


# scrapy-playwright ships no types, so its handler is Any to mypy.
class RenderingDownloadHandler(ScrapyPlaywrightDownloadHandler):  # type: ignore[misc]
    """``DOWNLOAD_HANDLERS`` entry for http and https (see the module docstring)."""

    lazy = False
    # One request interception per reused page (:mod:`.page_interception`); the benchmark's
    # comparison turns it off.
    route_switch = True

    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        self.render = RenderConfig.from_settings(crawler.settings)
        self.network_guard = NetworkGuard.of(crawler)
        self.config.max_pages_per_context = _UNLIMITED
        self.config.navigation_timeout_ms = self.render.timeout_ms
        # Blocked fonts are not loaded at all (a Chromium switch), nor images
        # with RENDER_IMAGES_UNLOADED; other blocked types and domains are
        # aborted by the route handler (:mod:`.blocking`).
        self.config.launch_options = {
            **self.config.launch_options,
            "args": with_switches(
                self.config.launch_options.get("args", []),
                self.render.block_resource_types,
                images_unloaded=self.render.images_unloaded,
            ),
        }
        self._blocked: AbortPredicate | None = chain(
            self.abort_request,
            ResourceBlocker(self.render.block_resource_types, self.render.block_domains),
        )
        self.abort_request: AbortPredicate = self._route_request
        self.background = Background()
        self.restarts = BrowserRestarts(
            self.render, self.stats, self._restart_browser, lambda: hasattr(self, "browser")
        )
        self.reuse = PageReuse(self.render, self.stats, self.background)
        self.cookies = ContextCookies.of(crawler)
        self.driver = Driver(self.render.driver_node_options, self._start_driver, self._driver_gone)
        self.attempts = Attempts(
            self.render,
            self.stats,
            slots=RenderSlots.of(crawler, self.render.concurrency),
            restarts=self.restarts,
            reuse=self.reuse,
            driver=self.driver,
            download=self._download_request,
            close_context=self._close_context,
            context_for=self.cookies.context_for,
        )
        self._closed = False
        self._turns: HostTurns | None = None
        self._sources = RenderedSources.of(crawler)
        if self.render.enabled:
            problem = executable_problem(self.config.launch_options)
            if problem is not None:
                logger.error(problem)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RenderingDownloadHandler:
        """The same instance for every scheme of ``crawler``: one driver, one browser."""
        return shared(crawler, cls, lambda: cls(crawler))

    async def _maybe_launch_in_thread(self) -> None:
        """Not at engine start: the driver starts with the first rendered page."""

    async def download_request(self, request: Request) -> Response:
        if self.render.enabled and request.meta.get("playwright"):
            return await self.attempts.render(request)
        # The connection is opened, and its host resolved, before the first
        # await below: the guard hears about this request's host just in time.
        proxy = request.meta.get("proxy")
        if proxy:
            self.network_guard.connecting(urlsplit(str(proxy)).hostname or "", False)
        else:
            hostname = urlsplit(request.url).hostname or ""
            self.network_guard.connecting(hostname, bool(request.meta.get(GUARDED)))
        return await HTTP11DownloadHandler.download_request(self, request)

    async def close(self) -> None:
        if self._closed:  # called once per scheme
            return
        self._closed = True
        await self.restarts.stop()
        self.attempts.cancel_all()
        await self.background.wait()  # pages and contexts being closed
        await super().close()

    async def _close(self) -> None:
        try:
            await asyncio.wait_for(super()._close(), 3 * CLOSE_TIMEOUT)
        except (TimeoutError, PlaywrightError) as exc:
            logger.warning("Closing the browser failed: %r", exc)

    # --- scrapy-playwright's hooks, overridden -----------------------------------------
    def _route_request(self, request: PlaywrightRequest) -> bool | Awaitable[bool]:
        """scrapy-playwright's abort hook, which sees every request of a page
        (``page.route("**")``): counted, then aborted if blocked."""
        self.stats.inc_value("render/browser_requests")
        return self._blocked(request) if self._blocked is not None else False

    async def _create_page(self, request: Request, spider: Spider) -> Page:
        page: Page = await super()._create_page(request, spider)
        # scrapy-playwright counts every request and response of the page by
        # resource type and method from page events. Each event is a message
        # from the driver to this process, per sub-request, paid by every page
        # (docs/BENCHMARKS.md, "Figures moved out of code comments").
        # Unsubscribed; render/browser_requests counts them.
        page.remove_listener("request", self._increment_request_stats)
        page.remove_listener("response", self._increment_response_stats)
        page.on("crash", self.reuse.crashed)
        state = current_attempt()
        if state is not None:
            state.pages.append(page)
            if state.reuse and self.route_switch:  # one request interception for all its URLs
                RouteSwitch.install(page)
        return page

    async def _download_request_with_page(
        self, request: Request, page: Page, spider: Spider
    ) -> Response:
        """Render on the request's cookie jar: its cookies into the page's context
        before the navigation, what the page changed back into the jar once it
        has rendered (:mod:`.context_cookies`)."""
        context = page.context
        jar = await self.cookies.give(request, context)
        response: Response = await super()._download_request_with_page(request, page, spider)
        if jar is not None and await self.cookies.take_back(request, context, jar):
            response.flags.append(TAKEN_FROM_BROWSER)
        return response

    async def _get_response_and_download(
        self, request: Request, page: Page, spider: Spider
    ) -> tuple[PlaywrightResponse | None, Download | None]:
        """Navigate, once the host's cluster-wide turn is granted (see ``politeness/turns.py``)."""
        if self._turns is None:
            self._turns = HostTurns.for_navigation(self._crawler)
        waited = await self._turns.wait(request.url)
        state = current_attempt()
        if state is not None:
            state.turn_wait += waited
        navigated: tuple[PlaywrightResponse | None, Download | None]
        navigated = await super()._get_response_and_download(request, page, spider)
        response = navigated[0]
        if self._sources.enabled and isinstance(response, PlaywrightResponse):
            # WARC_ENABLED: the document as received, for its response record
            # (the Scrapy response's body will be the rendered DOM).
            with suppress(PlaywrightError):
                self._sources.bodies[request] = await response.body()
        return navigated

    async def _apply_page_methods(self, page: Page, request: Request, spider: Spider) -> None:
        """Wait for the content: the request's selector, or else network idle (bounded)."""
        selector = request.meta.get(RENDER_WAIT_SELECTOR)
        if isinstance(selector, str) and selector:
            await page.wait_for_selector(selector, state="attached", timeout=self.render.timeout_ms)
        elif self.render.idle_timeout > 0:
            try:
                await page.wait_for_load_state("networkidle", timeout=self.render.idle_timeout_ms)
            except PlaywrightTimeoutError:
                # Pages that poll forever never go idle; take what has rendered.
                self.stats.inc_value("render/idle_timeout")

    # --- driver, contexts and browser ------------------------------------------------
    async def _start_driver(self) -> BrowserProvider:
        """Launch Playwright for :mod:`.driver` (scrapy-playwright's own launch)."""
        await self._launch()
        self.restarts.watch_memory()
        provider: BrowserProvider = self.browser_provider
        return provider

    def _driver_gone(self, provider: BrowserProvider) -> None:
        if self._closed or getattr(self, "browser_provider", None) is not provider:
            return
        del self.browser_provider
        self.driver.exited()
        self.stats.inc_value("render/driver_restarts")
        self._lost("Playwright's driver exited unexpectedly; starting a new one")

    async def _restart_browser(self) -> None:
        """The restart ``self.restarts`` found due: the browser closed, the next page
        launches a new one."""
        async with self.browser_launch_lock:
            browser: Browser | None = getattr(self, "browser", None)
            kind, reason = self.restarts.due_because
            if browser is not None:
                del self.browser
            self._forget_contexts()
        if browser is None:
            return
        logger.info("Restarting Chromium: %s", reason)
        self.stats.inc_value("render/browser_restarts")
        self.stats.inc_value(f"render/browser_restarts/{kind}")
        with suppress(PlaywrightError, TimeoutError):
            await asyncio.wait_for(browser.close(), CLOSE_TIMEOUT)

    async def _maybe_launch_browser(self) -> None:
        async with self.browser_launch_lock:
            if not hasattr(self, "browser"):
                browser = await self.browser_provider.launch_browser()
                self.browser = browser
                self.stats.inc_value("playwright/browser_count")
                browser.on("disconnected", lambda: self._browser_gone(browser))

    def _browser_gone(self, browser: Browser) -> None:
        """Chromium disconnected. Unless we closed it, relaunch and retry its pages."""
        if self._closed or getattr(self, "browser", None) is not browser:
            return  # shut down or restarted on purpose
        self.stats.inc_value("render/browser_crashes")
        self._lost("Chromium exited unexpectedly; relaunching it")

    def _lost(self, what: str) -> None:
        """The browser is gone: forget it and retry the attempts that were using it."""
        if hasattr(self, "browser"):
            del self.browser
        self._forget_contexts()
        logger.warning("%s and retrying the %d pages in flight", what, self.attempts.in_flight)
        self.attempts.crash_all()

    def _forget_contexts(self) -> None:
        """The browser is gone or going: its contexts and pages with it."""
        self.context_wrappers.clear()
        self.reuse.clear()
        self.restarts.new_browser()

    def _close_context(self, generation: str) -> None:
        """Close the contexts of ``generation``, retired and unused: its own and
        its jars' (:mod:`.context_cookies`)."""
        self.reuse.drop(generation)
        for name in [n for n in self.context_wrappers if in_generation(n, generation)]:
            self.reuse.drop(name)  # closed with their context
            wrapper = self.context_wrappers[name]
            self.stats.inc_value("render/contexts_recycled")
            self.background.run(wrapper.context.close(), f"closing context {name}")
