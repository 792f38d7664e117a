"""One request interception per reused page, for its whole life.

scrapy-playwright routes every request of a page through a handler built for
the Scrapy request being downloaded: it puts that request's headers, method
and body on the navigation and aborts what ``abort_request`` says. When it is
given a page again (page reuse, :mod:`.page_pool`) it calls ``page.unroute("**")``
and then ``page.route("**", handler)`` for each URL. Removing a page's last
route makes Playwright's driver turn Chromium's request interception off
(``Fetch.disable``, ``Network.setCacheDisabled``) and the new route turns it
on again: four DevTools commands per URL, and Chromium reconfiguring how the
page's requests are intercepted, a cost every page pays (docs/BENCHMARKS.md,
"Reading the rendering runs", one request interception per reused page).

:class:`RouteSwitch` keeps one route on the page and swaps the handler behind
it in Python. It replaces ``route`` and ``unroute`` of that one Page object
only (pages a spider asks for with ``playwright_include_page`` keep
Playwright's own); any other pattern goes to Playwright as before.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from playwright.async_api import Page, Route
from playwright.async_api import Request as PlaywrightRequest

Handler = Callable[[Route, PlaywrightRequest], Awaitable[Any]]
EVERY_URL = "**"


class RouteSwitch:
    """The page's one ``"**"`` route, whose handler each ``route("**", h)`` replaces."""

    def __init__(self, page: Page) -> None:
        self._page_route = page.route
        self._page_unroute = page.unroute
        self._page_unroute_all = page.unroute_all
        self._handler: Handler | None = None
        self._installed = False

    @classmethod
    def install(cls, page: Page) -> RouteSwitch:
        switch = cls(page)
        page.route = switch.route  # type: ignore[method-assign, assignment]
        page.unroute = switch.unroute  # type: ignore[method-assign, assignment]
        page.unroute_all = switch.unroute_all  # type: ignore[method-assign]
        return switch

    async def route(self, url: Any, handler: Handler, *, times: int | None = None) -> Any:
        if url != EVERY_URL or times is not None:
            return await self._page_route(url, handler, times=times)
        self._handler = handler
        if not self._installed:
            await self._page_route(EVERY_URL, self._dispatch)
            self._installed = True
        return None

    async def unroute(self, url: Any, handler: Handler | None = None) -> None:
        """``unroute("**")`` keeps the route: the next ``route("**", h)`` swaps its
        handler (until then, requests still go to the last one, as they would
        have between the two calls)."""
        if url != EVERY_URL or handler is not None:
            await self._page_unroute(url, handler)

    async def unroute_all(self, behavior: Any = None) -> None:
        """Every route removed, ours too: the next ``route("**", h)`` installs it again."""
        self._installed = False
        await self._page_unroute_all(behavior=behavior)

    async def _dispatch(self, route: Route, request: PlaywrightRequest) -> None:
        assert self._handler is not None, "the route is installed with its first handler"
        await self._handler(route, request)
