"""One rendered request, in attempts: each under ``RENDER_DEADLINE``, all of them
cancelled at once when their browser dies, and retried on the next browser.

A page can hang in ways no Playwright timeout covers (a ``new_page()`` in
flight when Chromium dies never returns), so each attempt runs as a task of
its own, which :class:`Attempts` can give up on without waiting for it to end:

- after ``RENDER_DEADLINE`` (plus the time it waited for its host's turn,
  which is politeness, not rendering) it is cancelled and fails with
  :class:`~.errors.RenderTimeout`, which RetryMiddleware retries;
- when Chromium or Playwright's driver dies, the handler calls
  :meth:`Attempts.crash_all`, which cancels every attempt in flight: each is
  retried on the relaunched browser, up to ``RENDER_CRASH_RETRIES`` times,
  then fails with :class:`~.errors.BrowserCrashed`.

An attempt takes its context from :mod:`.restarts` (which restarts the
browser first when that is due), an idle page from :mod:`.page_reuse`, and
downloads through scrapy-playwright (the handler's ``download``). What it
did that its caller needs (pages opened, turn waited, page reuse) is an
:class:`Attempt`, which the handler's scrapy-playwright overrides find
through :func:`current_attempt`: they run inside the attempt's task, called
by scrapy-playwright, with no way to pass it along.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass, field

from playwright.async_api import Page
from scrapy import Request
from scrapy.http import Response
from scrapy.statscollectors import StatsCollector

from spiders_project.rendering.config import RenderConfig
from spiders_project.rendering.driver import Driver
from spiders_project.rendering.errors import BrowserCrashed, RenderTimeout
from spiders_project.rendering.page_reuse import PageReuse
from spiders_project.rendering.restarts import BrowserRestarts
from spiders_project.rendering.slots import RenderSlots

logger = logging.getLogger(__name__)


@dataclass
class Attempt:
    """What one attempt (one task) did that its caller needs to know."""

    # When it started (the loop's clock), for the render time the health check judges.
    started: float = 0.0
    # Pages it opened, closed if it is cancelled (scrapy-playwright closes a
    # page on errors, not on cancellation).
    pages: list[Page] = field(default_factory=list)
    # Seconds it waited for its host's turn, not counted in RENDER_DEADLINE.
    turn_wait: float = 0.0
    # Its page may serve further URLs (page reuse; not a page the spider asked for).
    reuse: bool = False


_current: ContextVar[Attempt | None] = ContextVar("render_attempt", default=None)


def current_attempt() -> Attempt | None:
    """The attempt whose task is running, or None outside an attempt."""
    return _current.get()


class Attempts:
    """Renders requests, at most ``RENDER_CONCURRENCY`` at once (``slots``).

    ``download`` is scrapy-playwright's download of one request on its
    ``playwright_context``; ``close_context`` closes the contexts of a
    generation that :mod:`.restarts` retired (both the handler's: they touch
    its state); ``context_for`` names the context of a request within the
    generation (its cookie jar's: :mod:`.context_cookies`).
    """

    def __init__(
        self,
        render: RenderConfig,
        stats: StatsCollector,
        *,
        slots: RenderSlots,
        restarts: BrowserRestarts,
        reuse: PageReuse,
        driver: Driver,
        download: Callable[[Request], Awaitable[Response]],
        close_context: Callable[[str], None],
        context_for: Callable[[Request, str], str] = lambda request, generation: generation,
    ) -> None:
        self.config = render
        self.stats = stats
        self.slots = slots
        self.restarts = restarts
        self.reuse = reuse
        self.driver = driver
        self._download = download
        self._close_context = close_context
        self._context_for = context_for
        self._rendering = 0
        self._tasks: set[asyncio.Task[Response]] = set()
        self._crashed: set[asyncio.Task[Response]] = set()

    @property
    def in_flight(self) -> int:
        return sum(1 for task in self._tasks if not task.done())

    def crash_all(self) -> None:
        """The browser is gone: cancel every attempt in flight, to be retried."""
        for task in [task for task in self._tasks if not task.done()]:
            self._crashed.add(task)
            task.cancel()

    def cancel_all(self) -> None:
        """The worker shuts down: cancel every attempt, not to be retried."""
        for task in self._tasks:
            task.cancel()

    async def render(self, request: Request) -> Response:
        await self.slots.acquire(request)  # a no-op once RenderMiddleware took the slot
        self._rendering += 1
        self.stats.max_value("render/max_concurrent", self._rendering)
        try:
            return await self._with_retries(request)
        finally:
            self._rendering -= 1
            self.slots.release(request)
            # Per-attempt settings of ours; a retry or dead letter needn't carry them.
            request.meta.pop("playwright_page_goto_kwargs", None)

    async def _with_retries(self, request: Request) -> Response:
        loop = asyncio.get_running_loop()
        for attempt in itertools.count():
            context = await self.restarts.next_context()
            state = Attempt(started=loop.time())
            try:
                response = await self._run(request, context, state)
            finally:
                if self.restarts.page_done(context):
                    self._close_context(context)
            if response is not None:
                self.stats.inc_value("render/pages")
                self.restarts.rendered(loop.time() - state.started - state.turn_wait)
                return response
            if attempt >= self.config.crash_retries:
                raise BrowserCrashed(
                    f"the browser died {attempt + 1} times while rendering {request.url}"
                )
            self.stats.inc_value("render/crash_retries")
            logger.debug("Retrying %s on a relaunched browser", request.url)
        raise AssertionError("unreachable")

    async def _run(self, request: Request, context: str, state: Attempt) -> Response | None:
        """The attempt's response; None if its browser died under it (retry it)."""
        task = asyncio.ensure_future(self._attempt(request, context, state))
        self._tasks.add(task)
        try:
            return await self._within_deadline(request, task, state)
        except asyncio.CancelledError:
            if task not in self._crashed:
                raise
            return None
        finally:
            self._tasks.discard(task)
            self._crashed.discard(task)

    async def _within_deadline(
        self, request: Request, task: asyncio.Task[Response], state: Attempt
    ) -> Response:
        """The attempt's result. After RENDER_DEADLINE (plus the time it waited for
        its host's turn) it is cancelled, without waiting for it to end."""
        loop = asyncio.get_running_loop()
        start = loop.time()
        try:
            while True:
                remaining = start + self.config.deadline + state.turn_wait - loop.time()
                if remaining <= 0:
                    task.cancel()
                    self.stats.inc_value("render/deadline_exceeded")
                    raise RenderTimeout(
                        f"rendering {request.url} took over RENDER_DEADLINE "
                        f"({self.config.deadline:g} s); attempt cancelled"
                    )
                done, _ = await asyncio.wait({task}, timeout=remaining)
                if done:
                    return task.result()
        except asyncio.CancelledError:
            if not task.done():  # we were cancelled, not the attempt
                task.cancel()
            raise

    async def _attempt(self, request: Request, generation: str, state: Attempt) -> Response:
        """One attempt, in its own task (so :func:`current_attempt` is ``state``)."""
        _current.set(state)
        context = self._context_for(request, generation)
        request.meta["playwright_context"] = context
        request.meta["playwright_page_goto_kwargs"] = {
            "wait_until": self.config.wait_until,
            "timeout": self.config.timeout_ms,
        }
        # A spider that asks for the page (playwright_include_page) gets its own.
        state.reuse = self.reuse.enabled and not request.meta.get("playwright_include_page")
        try:
            await self.driver.ensure_started(request.url)
            if state.reuse:
                self.reuse.lend(request, context, state.pages)
            response = await self._download(request)
            if state.reuse:
                self.reuse.take_back(request, context, state.pages)
            return response
        finally:
            self.reuse.settle(request, state.reuse, state.pages)
