"""The download handler for ``http`` and ``https``: plain HTTP, or a page rendered in Chromium.

A subclass of scrapy-playwright's handler that keeps its page handling
(navigation, headers, redirects, downloads) and changes what a crawler that
runs for days needs changed:

- **Lazy**: Playwright's Node driver starts with the first page that needs
  rendering, not when the engine starts, so a worker that only fetches plain
  HTTP never pays for it (about 125 MB of RSS per driver otherwise).
- **One instance for both schemes**: one driver and one Chromium per worker,
  instead of one of each per scheme.
- **Bounded**: at most ``RENDER_CONCURRENCY`` pages render at once, whatever
  ``CONCURRENT_REQUESTS`` lets through for plain HTTP (:mod:`.slots`); contexts
  and the browser are recycled (:mod:`.recycle`), and the browser is restarted
  when its processes outgrow ``RENDER_MAX_RSS_MB`` or its pages get far slower
  than usual (:mod:`.health`), each time once its pages in flight are done.
- **Pages reused**: an open page is navigated to the next URL of its context
  instead of being closed and opened again, which spares Chromium a renderer
  process per URL; its request interception stays on between URLs
  (:mod:`.routes`), its garbage is collected while it waits, and a page that
  failed, crashed or sat idle too long is closed (:mod:`.pages`).
- **Never hangs**: each attempt runs under ``RENDER_DEADLINE``. When Chromium
  dies, every attempt in flight on it is cancelled at once (a ``new_page()``
  in flight at that moment would otherwise never return) and retried on the
  relaunched browser, up to ``RENDER_CRASH_RETRIES`` times. The same happens
  when Playwright's Node driver dies: a new one is started.
- **Polite**: the host's cluster-wide turn (``HostGateMiddleware``'s gate) is
  taken again right before ``page.goto``, once the page exists
  (:mod:`.politeness`); time spent waiting for it is not counted in the deadline.
- **Waits for content**: network idle (bounded by ``RENDER_IDLE_TIMEOUT``) or
  the request's ``render_wait_selector``, instead of ``playwright_page_methods``
  (PageMethod objects cannot travel through the JSON frontier).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import weakref
from collections.abc import Awaitable
from contextlib import suppress
from contextvars import ContextVar
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from playwright.async_api import Browser, CDPSession, Page
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

from spiders_project import internals
from spiders_project.meta import GUARDED
from spiders_project.politeness.turns import HostTurns
from spiders_project.rendering.blocking import (
    AbortPredicate,
    ResourceBlocker,
    chain,
    with_switches,
)
from spiders_project.rendering.config import RenderConfig, executable_problem
from spiders_project.rendering.errors import BrowserCrashed, RenderTimeout
from spiders_project.rendering.health import MEMORY_EVERY, BrowserHealth, browser_rss_mb
from spiders_project.rendering.pages import PagePool
from spiders_project.rendering.recycle import Recycler
from spiders_project.rendering.routes import RouteSwitch
from spiders_project.rendering.slots import RenderSlots
from spiders_project.runtime.tasks import spawn_loop, stop_tasks
from spiders_project.scope.networks import NetworkGuard
from spiders_project.wiring import shared

logger = logging.getLogger(__name__)


@dataclass
class _Attempt:
    """What one attempt (one task) did that its caller needs to know."""

    # Pages it opened, closed if it is cancelled (scrapy-playwright closes a
    # page on errors, not on cancellation).
    pages: list[Page] = field(default_factory=list)
    # Seconds it waited for its host's turn, not counted in RENDER_DEADLINE.
    turn_wait: float = 0.0
    # Its page may serve further URLs (page reuse; not a page the spider asked for).
    reuse: bool = False


_current: ContextVar[_Attempt | None] = ContextVar("render_attempt", default=None)
# Our RENDER_CONCURRENCY semaphore is the page cap. scrapy-playwright's
# per-context semaphore loses a slot whenever new_page() is cancelled, so it
# must never be the one that blocks.
_UNLIMITED = 1_000_000
_CLOSE_TIMEOUT = 10.0


# scrapy-playwright ships no types, so its handler is Any to mypy.
class RenderingDownloadHandler(ScrapyPlaywrightDownloadHandler):  # type: ignore[misc]
    """``DOWNLOAD_HANDLERS`` entry for http and https (see the module docstring)."""

    lazy = False
    # One request interception per reused page (:mod:`.routes`); the benchmark's
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
        self.recycler = Recycler(self.render.pages_per_context, self.render.pages_per_browser)
        self.pages: PagePool[Page] = PagePool(self.render.urls_per_page)
        # A DevTools session per reused page, for the garbage collection between URLs.
        self._devtools: weakref.WeakKeyDictionary[Page, CDPSession] = weakref.WeakKeyDictionary()
        self.health = BrowserHealth(self.render.max_rss_mb, self.render.slowdown)
        self._watch: asyncio.Task[None] | None = None
        self.slots = RenderSlots.of(crawler, self.render.concurrency)
        self._start_lock = asyncio.Lock()
        self._restart_lock = asyncio.Lock()
        self._started = False
        self._closed = False
        self._rendering = 0
        self._attempts: set[asyncio.Task[Response]] = set()
        self._crashed: set[asyncio.Task[Response]] = set()
        self._background: set[asyncio.Task[None]] = set()
        self._turns: HostTurns | None = None
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
            return await self._render(request)
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
        await stop_tasks([self._watch] if self._watch is not None else [])
        for task in self._attempts:
            task.cancel()
        if self._background:  # pages and contexts being closed; each has its own timeout
            await asyncio.wait(set(self._background), timeout=_CLOSE_TIMEOUT)
        await super().close()

    async def _close(self) -> None:
        try:
            await asyncio.wait_for(super()._close(), 3 * _CLOSE_TIMEOUT)
        except (TimeoutError, PlaywrightError) as exc:
            logger.warning("Closing the browser failed: %r", exc)

    # --- one rendered request --------------------------------------------------------
    async def _render(self, request: Request) -> Response:
        await self.slots.acquire(request)  # a no-op once RenderMiddleware took the slot
        self._rendering += 1
        self.stats.max_value("render/max_concurrent", self._rendering)
        try:
            return await self._render_with_retries(request)
        finally:
            self._rendering -= 1
            self.slots.release(request)
            # Per-attempt settings of ours; a retry or dead letter needn't carry them.
            request.meta.pop("playwright_page_goto_kwargs", None)

    async def _render_with_retries(self, request: Request) -> Response:
        loop = asyncio.get_running_loop()
        for attempt in itertools.count():
            context = await self._next_context()
            state = _Attempt()
            started = loop.time()
            task = asyncio.ensure_future(self._attempt(request, context, state))
            self._attempts.add(task)
            try:
                response = await self._within_deadline(request, task, state)
            except asyncio.CancelledError:
                if task not in self._crashed:
                    raise
                if attempt >= self.render.crash_retries:
                    raise BrowserCrashed(
                        f"the browser died {attempt + 1} times while rendering {request.url}"
                    ) from None
                self.stats.inc_value("render/crash_retries")
                logger.debug("Retrying %s on a relaunched browser", request.url)
                continue
            finally:
                self._attempts.discard(task)
                self._crashed.discard(task)
                if self.recycler.release(context):
                    self._close_context(context)
            self.stats.inc_value("render/pages")
            slow = self.health.rendered(loop.time() - started - state.turn_wait)
            if slow is not None:
                self._restart_soon("slowdown", slow)
            return response
        raise AssertionError("unreachable")

    async def _within_deadline(
        self, request: Request, task: asyncio.Task[Response], state: _Attempt
    ) -> Response:
        """The attempt's result. After RENDER_DEADLINE (plus the time it waited for
        its host's turn) it is cancelled, without waiting for it to end."""
        loop = asyncio.get_running_loop()
        start = loop.time()
        try:
            while True:
                remaining = start + self.render.deadline + state.turn_wait - loop.time()
                if remaining <= 0:
                    task.cancel()
                    self.stats.inc_value("render/deadline_exceeded")
                    raise RenderTimeout(
                        f"rendering {request.url} took over RENDER_DEADLINE "
                        f"({self.render.deadline:g} s); attempt cancelled"
                    )
                done, _ = await asyncio.wait({task}, timeout=remaining)
                if done:
                    return task.result()
        except asyncio.CancelledError:
            if not task.done():  # we were cancelled, not the attempt
                task.cancel()
            raise

    async def _attempt(self, request: Request, context: str, state: _Attempt) -> Response:
        _current.set(state)
        request.meta["playwright_context"] = context
        request.meta["playwright_page_goto_kwargs"] = {
            "wait_until": self.render.wait_until,
            "timeout": self.render.timeout_ms,
        }
        # A spider that asks for the page (playwright_include_page) gets its own.
        reuse = self.pages.enabled and not request.meta.get("playwright_include_page")
        state.reuse = reuse
        try:
            await self._ensure_started(request.url)
            if reuse:
                # scrapy-playwright navigates a page given in meta, and leaves
                # it open when the request asks to include it.
                idle = self._idle_page(context)
                if idle is not None:
                    self.stats.inc_value("render/pages_reused")
                    state.pages.append(idle)
                    request.meta["playwright_page"] = idle
                request.meta["playwright_include_page"] = True
            response: Response = await self._download_request(request)
            if reuse:
                page = request.meta.pop("playwright_page", None)
                if page in state.pages:  # the page that rendered it: healthy
                    state.pages.remove(page)
                    self._give_back(context, page)
            return response
        finally:
            if reuse:  # a Page never travels with the request (retries, dead letters)
                request.meta.pop("playwright_page", None)
                request.meta.pop("playwright_include_page", None)
            for page in state.pages:  # failed or cancelled: not reused
                self.pages.forget(page)
                if not page.is_closed():
                    self._in_background(page.close(), "closing a cancelled page")

    def _idle_page(self, context: str) -> Page | None:
        while (page := self.pages.take(context)) is not None:
            if not page.is_closed():
                return page
            self.pages.forget(page)
        return None

    def _give_back(self, context: str, page: Page) -> None:
        """A page that rendered its URL: kept for the next one of its context, or closed."""
        loop = asyncio.get_running_loop()
        if page.is_closed():
            self.pages.forget(page)
        elif self.pages.give_back(context, page, loop.time()):
            loop.call_later(self.render.idle_page_close, self._close_if_idle, page)
            if self.render.gc_between_urls:
                self._in_background(self._collect_garbage(page), "collecting a page's garbage")
        else:
            self._in_background(page.close(), "closing a page that served its URLs")

    async def _collect_garbage(self, page: Page) -> None:
        """A full garbage collection in the page's renderer before its next URL.

        A reused page's renderer keeps what its documents allocated until V8
        decides to collect: about 110 MB of PSS more over 4 pages than a new
        page per URL, in the benchmark. Collected while the page waits, it
        costs no measurable CPU per page (docs/BENCHMARKS.md, "Rendering").
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
        if self.pages.expire(page, asyncio.get_running_loop().time(), idle_for):
            self.stats.inc_value("render/idle_pages_closed")
            self._in_background(page.close(), "closing an idle page")

    def _route_request(self, request: PlaywrightRequest) -> bool | Awaitable[bool]:
        """scrapy-playwright's abort hook, which sees every request of a page
        (``page.route("**")``): counted, then aborted if blocked."""
        self.stats.inc_value("render/browser_requests")
        return self._blocked(request) if self._blocked is not None else False

    async def _create_page(self, request: Request, spider: Spider) -> Page:
        page: Page = await super()._create_page(request, spider)
        # scrapy-playwright counts every request and response of the page by
        # resource type and method from page events. Each event is a message
        # from the driver to this process, per sub-request: 0.005 to 0.015 CPU-s
        # per page in trials. Unsubscribed; render/browser_requests counts them.
        page.remove_listener("request", self._increment_request_stats)
        page.remove_listener("response", self._increment_response_stats)
        page.on("crash", self._page_crashed)
        state = _current.get()
        if state is not None:
            state.pages.append(page)
            if state.reuse and self.route_switch:  # one request interception for all its URLs
                RouteSwitch.install(page)
        return page

    def _page_crashed(self, page: Page) -> None:
        """A renderer died under one page (the browser lives on): never reuse it."""
        self.stats.inc_value("render/page_crashes")
        self.pages.forget(page)
        self._in_background(page.close(), "closing a crashed page")

    async def _get_response_and_download(
        self, request: Request, page: Page, spider: Spider
    ) -> tuple[PlaywrightResponse | None, Download | None]:
        """Navigate, once the host's cluster-wide turn is granted (see :mod:`.politeness`)."""
        if self._turns is None:
            self._turns = HostTurns.for_navigation(self._crawler)
        waited = await self._turns.wait(request.url)
        state = _current.get()
        if state is not None:
            state.turn_wait += waited
        navigated: tuple[PlaywrightResponse | None, Download | None]
        navigated = await super()._get_response_and_download(request, page, spider)
        return navigated

    async def _apply_page_methods(self, page: Page, request: Request, spider: Spider) -> None:
        """Wait for the content: the request's selector, or else network idle (bounded)."""
        selector = request.meta.get("render_wait_selector")
        if isinstance(selector, str) and selector:
            await page.wait_for_selector(selector, state="attached", timeout=self.render.timeout_ms)
        elif self.render.idle_timeout > 0:
            try:
                await page.wait_for_load_state("networkidle", timeout=self.render.idle_timeout_ms)
            except PlaywrightTimeoutError:
                # Pages that poll forever never go idle; take what has rendered.
                self.stats.inc_value("render/idle_timeout")

    # --- driver, contexts and browser ------------------------------------------------
    async def _ensure_started(self, url: str) -> None:
        if self._started:
            return
        async with self._start_lock:
            if not self._started:
                logger.info("Starting the Playwright driver for a rendered page (%s)", url)
                # Playwright starts its driver with a copy of this process'
                # environment and takes no other: NODE_OPTIONS goes there.
                node_options = self.render.driver_node_options
                if node_options and "NODE_OPTIONS" not in os.environ:
                    os.environ["NODE_OPTIONS"] = node_options
                await self._launch()
                self._started = True
                self._watch_driver(self.browser_provider)
                if self.health.max_rss_mb and self._watch is None:
                    self._watch = spawn_loop("browser memory watch", self._watch_memory())

    def _watch_driver(self, provider: BrowserProvider) -> None:
        """Restart the Node driver if it exits (killed, out of memory).

        Playwright's public API has no event for that; its private connection
        to the driver emits "close" (reached through :mod:`spiders_project.internals`,
        which raises InternalsMissing here if it is gone). Without it, every
        later rendered page would fail until the worker restarts.
        """
        internals.on_driver_exit(
            provider.playwright,
            provider.playwright_context_manager,
            lambda: self._driver_gone(provider),
        )

    def _driver_gone(self, provider: BrowserProvider) -> None:
        if self._closed or getattr(self, "browser_provider", None) is not provider:
            return
        del self.browser_provider
        self._started = False
        self.stats.inc_value("render/driver_restarts")
        self._lost("Playwright's driver exited unexpectedly; starting a new one")

    async def _next_context(self) -> str:
        """The context for a new page; restarts the browser first when it is due."""
        await self._restart_if_due()
        return self.recycler.acquire()

    async def _restart_if_due(self) -> None:
        """Restart the browser if it is due, once its pages in flight are done
        (new pages wait for the new browser meanwhile)."""
        if self.recycler.browser_due():
            async with self._restart_lock:
                if self.recycler.browser_due():
                    await self.recycler.drained.wait()
                    await self._restart_browser()

    def _restart_soon(self, kind: str, reason: str) -> None:
        """Ask for a restart of the browser once its pages in flight are done."""
        if self.recycler.request_restart(kind, reason):
            logger.info(
                "Chromium will restart once its %d pages in flight are done: %s",
                self.recycler.in_flight,
                reason,
            )

    async def _watch_memory(self) -> None:
        """Every MEMORY_EVERY seconds, the browser's size against RENDER_MAX_RSS_MB;
        an idle browser found too big is restarted at once (the next page starts
        a new one), a busy one once its pages are done."""
        while True:
            await asyncio.sleep(MEMORY_EVERY)
            if not hasattr(self, "browser"):
                continue
            rss = await asyncio.to_thread(browser_rss_mb)
            self.stats.max_value("render/max_browser_rss_mb", round(rss))
            too_big = self.health.too_big(rss)
            if too_big is not None and not self.recycler.browser_due():
                self._restart_soon("memory", too_big)
            if self.recycler.browser_due() and self.recycler.drained.is_set():
                await self._restart_if_due()

    async def _restart_browser(self) -> None:
        async with self.browser_launch_lock:
            browser: Browser | None = getattr(self, "browser", None)
            kind, reason = self.recycler.due_because
            if browser is not None:
                del self.browser
            self.context_wrappers.clear()
            self.pages.clear()
            self.recycler.browser_restarted()
            self.health.restarted()
        if browser is None:
            return
        logger.info("Restarting Chromium: %s", reason)
        self.stats.inc_value("render/browser_restarts")
        self.stats.inc_value(f"render/browser_restarts/{kind}")
        with suppress(PlaywrightError, TimeoutError):
            await asyncio.wait_for(browser.close(), _CLOSE_TIMEOUT)

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
        self.context_wrappers.clear()
        self.pages.clear()
        self.recycler.browser_restarted()
        self.health.restarted()
        victims = [task for task in self._attempts if not task.done()]
        logger.warning("%s and retrying the %d pages in flight", what, len(victims))
        for task in victims:
            self._crashed.add(task)
            task.cancel()

    def _close_context(self, name: str) -> None:
        self.pages.drop(name)  # closed with their context
        wrapper = self.context_wrappers.get(name)
        if wrapper is None:
            return
        self.stats.inc_value("render/contexts_recycled")
        self._in_background(wrapper.context.close(), f"closing context {name}")

    def _in_background(self, awaitable: Awaitable[None], what: str) -> None:
        async def run() -> None:
            try:
                await asyncio.wait_for(awaitable, _CLOSE_TIMEOUT)
            except (PlaywrightError, TimeoutError) as exc:
                logger.debug("%s failed: %r", what, exc)

        task = asyncio.ensure_future(run())
        self._background.add(task)
        task.add_done_callback(self._background.discard)
