"""The shared cookie jars in Chromium: a context per jar, given the jar's cookies
before a page navigates, read back once the page has rendered.

A page's cookies are its browser context's, which all the context's pages
share, and Chromium sends its own: a Cookie header on the navigation is
dropped. Contexts are kept **separate per jar**, not cleared between pages:
pages of several jars render at once, and an idle page (:mod:`.page_reuse`),
whose scripts go on running, could write into whichever jar's cookies its
context held at the moment; in a context of its own it only ever writes into
its own jar's. A context is named after its generation (:mod:`.recycle`) and
its jar (``render-3/jar:default``), and the generation's recycling closes all
of them; a page is reused only within its context, so within its jar. A
request without a jar (``COOKIES_ENABLED`` off, ``dont_merge_cookies``)
renders in the generation's own context, which is never given a jar's cookies.

- **Before navigation** the jar's copy is made fresh for the request's lease,
  as for a plain request (``ProcessJars.fresh``: a read that started after the
  lease), and the context is given what changed in the jar since it was last
  given or read (``cookies/browser.py``'s ``BrowserCopy``): with domain, path,
  expiry, Secure and HttpOnly. A jar that did not change costs no browser call.
- **After the page**, ``context.cookies()`` against what the context was given
  is what the page's server, scripts and sub-requests set or removed. It goes
  into the jar through ``ProcessJars.update``, a prior write like a
  Set-Cookie's, ahead of the links found on the page; the response is flagged
  so that the cookie middleware leaves its Set-Cookie headers alone.

One lock per context keeps a giving and a reading from interleaving. A cookie
the browser refuses (SameSite=None without Secure, characters it does not
allow) is one warning by name and domain, and the stat
``render/cookies_refused``; values are never logged.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field
from http.cookiejar import Cookie
from typing import Any

from playwright.async_api import BrowserContext
from playwright.async_api import Error as PlaywrightError
from scrapy import Request
from scrapy.crawler import Crawler
from scrapy.statscollectors import StatsCollector

from spiders_project.cookies import codec
from spiders_project.cookies.browser import BrowserCopy, Give, to_browser
from spiders_project.cookies.config import CookiesConfig
from spiders_project.cookies.store import ProcessJars, cookie_jars
from spiders_project.crawl.meta import LEASED_AT

logger = logging.getLogger(__name__)

JAR_CONTEXT = "/jar:"


def context_name(generation: str, jar: str | None) -> str:
    """The context a page of ``jar`` (None: no jar) renders in, in ``generation``."""
    return generation if jar is None else f"{generation}{JAR_CONTEXT}{jar}"


def in_generation(name: str, generation: str) -> bool:
    """Whether the context ``name`` is one of ``generation``'s (its own or a jar's)."""
    return name == generation or name.startswith(generation + JAR_CONTEXT)


@dataclass(eq=False)
class _Context:
    copy: BrowserCopy = field(default_factory=BrowserCopy)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class ContextCookies:
    """The jars' cookies in and out of browser contexts (see the module docstring).

    ``jars`` gives the crawler's jars (``cookies/store.py``'s ``cookie_jars``),
    asked for at the first rendered page; ``enabled`` is ``COOKIES_ENABLED``.
    """

    def __init__(
        self,
        jars: Callable[[], ProcessJars],
        enabled: bool = True,
        stats: StatsCollector | None = None,
        debug: bool = False,
    ) -> None:
        self.enabled = enabled
        self.stats = stats
        self.debug = debug
        self._make_jars = jars
        self._jars: ProcessJars | None = None
        # Forgotten with their context (closed, or gone with its browser).
        self._contexts: weakref.WeakKeyDictionary[BrowserContext, _Context] = (
            weakref.WeakKeyDictionary()
        )
        self._reported: set[tuple[str, str, str]] = set()

    @classmethod
    def of(cls, crawler: Crawler) -> ContextCookies:
        config = CookiesConfig.from_settings(crawler.settings)
        return cls(lambda: cookie_jars(crawler), config.enabled, crawler.stats, config.debug)

    @property
    def jars(self) -> ProcessJars:
        if self._jars is None:
            self._jars = self._make_jars()
        return self._jars

    def jar_of(self, request: Request) -> str | None:
        """The jar whose cookies ``request``'s page gets, or None: none."""
        if not self.enabled or request.meta.get("dont_merge_cookies", False):
            return None
        return codec.jar_id(request.meta.get("cookiejar"))

    def context_for(self, request: Request, generation: str) -> str:
        """The context ``request`` renders in, in ``generation``: its jar's."""
        return context_name(generation, self.jar_of(request))

    async def give(self, request: Request, context: BrowserContext) -> str | None:
        """Before ``request``'s page navigates: ``context`` given its jar's
        cookies as the request may send them. The jar, or None (no jar)."""
        jar = self.jar_of(request)
        if jar is None:
            return None
        local = await self.jars.fresh(jar, request.meta.get(LEASED_AT))
        state = self._contexts.get(context)
        if state is None:
            state = self._contexts[context] = _Context()
        async with state.lock:
            give = state.copy.to_give(local.cookies, time.time())
            if not give:
                return jar
            try:
                for domain, path, name in give.remove:
                    await context.clear_cookies(name=name, domain=domain, path=path)
                await self._add(context, give)
                shown = await context.cookies()
            except BaseException:
                state.copy.forget(give)
                raise
            refused = state.copy.given(give, shown)
        for cookie in refused:
            self._refused(jar, cookie)
        return jar

    async def take_back(self, request: Request, context: BrowserContext, jar: str) -> bool:
        """After ``request``'s page rendered: what the context's pages changed
        since it was given ``jar``'s cookies, into the jar. False if the
        context could not be read (it closed with its browser)."""
        state = self._contexts.get(context)
        if state is None:
            return False
        async with state.lock:
            try:
                shown = await context.cookies()
            except PlaywrightError as exc:
                logger.debug("The cookies of %s's context are gone: %s", request, exc)
                return False
            taken = state.copy.taken(shown, self.jars.jar(jar).cookies)
            if not taken:
                return True
            # In the lock: a page about to navigate is given the jar with this in it.
            self.jars.update(jar, taken.cookies, taken.removed)
        if self.stats is not None:
            self.stats.inc_value("render/cookies_taken")
        if self.debug:
            logger.debug(
                "Cookies from the page of %s changed in jar %s: %s",
                request,
                jar,
                ", ".join(taken.names),
            )
        return True

    async def _add(self, context: BrowserContext, give: Give) -> None:
        """``give``'s cookies into ``context``: all at once, or one at a time when
        the browser refuses the lot for one of them (those it refused are not
        in the context, which ``BrowserCopy.given`` finds)."""
        if not give.add:
            return
        # Playwright's SetCookieParam, a TypedDict of its private module.
        cookies: list[Any] = [to_browser(cookie) for cookie in give.add]
        try:
            await context.add_cookies(cookies)
            return
        except PlaywrightError:
            pass  # "Invalid cookie fields": which one, the browser does not say
        for one in cookies:
            with suppress(PlaywrightError):
                await context.add_cookies([one])

    def _refused(self, jar: str, cookie: Cookie) -> None:
        """One warning per jar and cookie (name and domain, never its value)."""
        if self.stats is not None:
            self.stats.inc_value("render/cookies_refused")
        key = (jar, cookie.domain, cookie.name)
        if key in self._reported:
            return
        if len(self._reported) > 10_000:
            self._reported.clear()
        self._reported.add(key)
        logger.warning(
            "Cookie %s of %s in jar %s not taken by the browser: its pages go without it",
            cookie.name,
            cookie.domain,
            jar,
        )
