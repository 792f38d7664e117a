"""Scrapy's CookiesMiddleware on jars the cluster shares (``store.py``).

Scrapy's own code does everything a cookie is: domain and path matching,
expiry, Secure, the server removing a cookie, ``request.cookies``,
``dont_merge_cookies`` and ``meta["cookiejar"]``. This subclass gives it, for
each request, this worker's copy of the request's jar once that copy is
causal (``SharedJars.fresh``), and sends what a response changed
(``SharedJars.changed``). ``COOKIES_ENABLED=False`` switches it off as it does
Scrapy's; ``COOKIES_SHARED=False`` keeps the jars in the process, as Scrapy does.

Cookie values are never logged: Scrapy's ``COOKIES_DEBUG`` lines print whole
Cookie and Set-Cookie headers, so this middleware never lets Scrapy's code
log, and with ``COOKIES_DEBUG`` logs the names (and domains) it sends and
receives instead.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from typing import Any

from scrapy import Request
from scrapy.crawler import Crawler
from scrapy.downloadermiddlewares.cookies import CookiesMiddleware
from scrapy.exceptions import NotConfigured
from scrapy.http import Response
from scrapy.http.cookies import CookieJar

from spiders_project.cookies import codec
from spiders_project.cookies.browser import TAKEN_FROM_BROWSER
from spiders_project.cookies.config import CookiesConfig
from spiders_project.cookies.store import LocalJar, ProcessJars, cookie_jars
from spiders_project.crawl.meta import LEASED_AT

logger = logging.getLogger(__name__)


class JarsById(defaultdict[Any, CookieJar]):
    """Scrapy's ``jars`` (keyed by ``meta["cookiejar"]``) on the store's copies,
    which are keyed by jar id (``codec.jar_id``)."""

    def __init__(self, store: ProcessJars) -> None:
        super().__init__()
        self.store = store

    def __getitem__(self, key: Any) -> CookieJar:
        return self.store.jar(codec.jar_id(key)).cookies

    def values(self) -> list[CookieJar]:  # type: ignore[override]
        """Every jar this worker holds a copy of, as Scrapy's ``jars.values()`` gives."""
        return [local.cookies for local in self.store.local_jars()]


class SharedCookiesMiddleware(CookiesMiddleware):
    """Downloader middleware at Scrapy's CookiesMiddleware's place (700)."""

    def __init__(self, store: ProcessJars, debug: bool = False) -> None:
        # Scrapy's debug lines hold cookie values: never on (see the module docstring).
        super().__init__(debug=False)
        self.store = store
        self.names_debug = debug
        self.jars = JarsById(store)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> SharedCookiesMiddleware:
        config = CookiesConfig.from_settings(crawler.settings)
        if not config.enabled:
            raise NotConfigured  # as Scrapy's: a message would be a warning in every log
        middleware = cls(cookie_jars(crawler), config.debug)
        middleware.crawler = crawler
        return middleware

    async def jar_for(self, request: Request) -> LocalJar:
        """The copy of ``request``'s jar it may go out with (read again if it was
        leased after the copy was read)."""
        jar = codec.jar_id(request.meta.get("cookiejar"))
        return await self.store.fresh(jar, request.meta.get(LEASED_AT))

    async def process_request(self, request: Request) -> None:  # type: ignore[override]
        if request.meta.get("dont_merge_cookies", False):
            return
        local = await self.jar_for(request)
        if request.cookies:
            before = codec.snapshot(local.cookies)
            super().process_request(request)
            self.store.changed(local, before)
        else:
            super().process_request(request)
        if self.names_debug:
            self._log_names("Sending cookies to %s: %s", request, local)

    def process_response(  # type: ignore[override]
        self, request: Request, response: Response
    ) -> Request | Response:
        if request.meta.get("dont_merge_cookies", False):
            return response
        if b"Set-Cookie" not in response.headers or TAKEN_FROM_BROWSER in response.flags:
            # Nothing to take (no snapshot, no write); or a rendered page's,
            # which its browser applied and whose cookies were taken from it.
            return response
        local = self.store.jar(codec.jar_id(request.meta.get("cookiejar")))
        before = codec.snapshot(local.cookies)
        super().process_response(request, response)
        change = self.store.changed(local, before)
        if self.names_debug:
            names = sorted(codec.split_field(f)[2] for f in (*change.sets, *change.deletes))
            logger.debug(
                "Cookies from %s changed in jar %s: %s", response, local.id, ", ".join(names)
            )
        return response

    def _log_names(self, message: str, request: Request, local: LocalJar) -> None:
        header = request.headers.get("Cookie")
        if not header:
            return
        names = [part.split(b"=", 1)[0].strip().decode("latin-1") for part in header.split(b";")]
        logger.debug(message, request, ", ".join(names))
