"""Scrapy's CookiesMiddleware on jars the cluster shares (``store.py``).

Scrapy's own code does everything a cookie is: domain and path matching,
expiry, Secure, the server removing a cookie, ``request.cookies``,
``dont_merge_cookies`` and ``meta["cookiejar"]``. This subclass gives it, for
each request, this worker's copy of the request's jar once that copy is
causal (``SharedJars.fresh``), and sends what a response changed
(``SharedJars.changed``). ``COOKIES_ENABLED=False`` switches it off as it does
Scrapy's; ``COOKIES_SHARED=False`` keeps the jars in the process, as Scrapy does.

With ``PROXIES``, a jar that holds a session keeps its proxy, and a banned
proxy retires the session (``pins.py``). For a spider that logs in again
(``session_expired`` and ``login``), each request and answer also passes the
jar's session (``logins.py``): a request waits while its jar logs in, and an
expired answer starts one login for the cluster.

Cookie values are never logged: Scrapy's ``COOKIES_DEBUG`` lines print whole
Cookie and Set-Cookie headers, so this middleware never lets Scrapy's code
log, and with ``COOKIES_DEBUG`` logs the names (and domains) it sends and
receives instead.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from typing import Any

from scrapy import Request, Spider, signals
from scrapy.crawler import Crawler
from scrapy.downloadermiddlewares.cookies import CookiesMiddleware
from scrapy.exceptions import NotConfigured
from scrapy.http import Response
from scrapy.http.cookies import CookieJar

from spiders_project.cookies import codec
from spiders_project.cookies.browser import TAKEN_FROM_BROWSER
from spiders_project.cookies.config import CookiesConfig, LoginConfig
from spiders_project.cookies.logins import Logins, logs_in_again
from spiders_project.cookies.pins import ProxyPins
from spiders_project.cookies.session_store import LocalSessions, RedisSessions, SessionStore
from spiders_project.cookies.store import LocalJar, ProcessJars, SharedJars, cookie_jars
from spiders_project.crawl.meta import LEASED_AT, PROXY_NAME
from spiders_project.dead_letters.config import DeadLettersConfig
from spiders_project.dead_letters.middleware import DeadLetters
from spiders_project.politeness.delays import HostPoliteness
from spiders_project.proxies.config import ProxyConfig
from spiders_project.proxies.pool import ProxyPool

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

    def __init__(
        self,
        store: ProcessJars,
        debug: bool = False,
        logins: Logins | None = None,
        pins: ProxyPins | None = None,
    ) -> None:
        # Scrapy's debug lines hold cookie values: never on (see the module docstring).
        super().__init__(debug=False)
        self.store = store
        self.names_debug = debug
        self.jars = JarsById(store)
        # The jars' sessions, for a spider that logs in again; None: plain cookies.
        self.logins = logins
        # Each jar's proxy, with PROXIES; None: no proxy of the pool to keep.
        self.pins = pins

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> SharedCookiesMiddleware:
        config = CookiesConfig.from_settings(crawler.settings)
        if not config.enabled:
            raise NotConfigured  # as Scrapy's: a message would be a warning in every log
        store = cookie_jars(crawler)
        proxied = bool(ProxyConfig.from_settings(crawler.settings).proxies)
        relogs = logs_in_again(crawler.spidercls)
        logins = pins = None
        if proxied or relogs:
            sessions = session_store(crawler, store)
            if relogs:
                logins = build_logins(crawler, store, sessions)
            if proxied:
                assert crawler.stats is not None
                pool, groups = ProxyPool.of(crawler), HostPoliteness.of(crawler)
                pins = ProxyPins(pool, groups, sessions, store, crawler.stats)
        middleware = cls(store, config.debug, logins, pins)
        middleware.crawler = crawler
        return middleware

    async def jar_for(self, request: Request) -> LocalJar:
        """The copy of ``request``'s jar it may go out with (read again if it was
        leased after the copy was read)."""
        jar = codec.jar_id(request.meta.get("cookiejar"))
        return await self.store.fresh(jar, request.meta.get(LEASED_AT))

    async def process_request(self, request: Request) -> Request | None:  # type: ignore[override]
        if request.meta.get("dont_merge_cookies", False):
            return None
        local = await self.jar_for(request)
        if self.pins is not None:
            local = await self.pins.pin(request, local)
        if self.logins is not None:
            local, later = await self.logins.before_request(request, local)
            if later is not None:
                return later  # back to the frontier while its jar logs in
        if request.cookies:
            before = codec.snapshot(local.cookies)
            super().process_request(request)
            self.store.changed(local, before)
        else:
            super().process_request(request)
        if self.names_debug:
            self._log_names("Sending cookies to %s: %s", request, local)
        return None

    async def process_response(  # type: ignore[override]
        self, request: Request, response: Response
    ) -> Request | Response:
        if request.meta.get("dont_merge_cookies", False):
            return response
        if self.logins is not None:
            return await self.logins.after_response(request, response, self.take)
        self.take(request, response)
        return response

    def take(self, request: Request, response: Response) -> None:
        """The cookies ``response`` sets, into its jar (Scrapy's code) and sent on."""
        if b"Set-Cookie" not in response.headers or TAKEN_FROM_BROWSER in response.flags:
            # Nothing to take (no snapshot, no write); or a rendered page's,
            # which its browser applied and whose cookies were taken from it.
            return
        local = self.store.jar(codec.jar_id(request.meta.get("cookiejar")))
        before = codec.snapshot(local.cookies)
        super().process_response(request, response)
        change = self.store.changed(local, before, request.meta.get(PROXY_NAME))
        if self.names_debug:
            names = sorted(codec.split_field(f)[2] for f in (*change.sets, *change.deletes))
            logger.debug(
                "Cookies from %s changed in jar %s: %s", response, local.id, ", ".join(names)
            )

    def _log_names(self, message: str, request: Request, local: LocalJar) -> None:
        header = request.headers.get("Cookie")
        if not header:
            return
        names = [part.split(b"=", 1)[0].strip().decode("latin-1") for part in header.split(b";")]
        logger.debug(message, request, ", ".join(names))


def session_store(crawler: Crawler, store: ProcessJars) -> SessionStore:
    """Where the jars' sessions (logins, pinned proxies) change: in Redis for
    the jars the cluster shares, or in this worker."""
    config = LoginConfig.from_settings(crawler.settings)
    if isinstance(store, SharedJars):
        return RedisSessions(store, config)
    return LocalSessions(config)


def build_logins(crawler: Crawler, store: ProcessJars, sessions: SessionStore) -> Logins:
    """The crawler's logins, on its jars' ``sessions``."""
    assert crawler.stats is not None
    logins = Logins(
        store,
        sessions,
        LoginConfig.from_settings(crawler.settings),
        crawler.stats,
        DeadLetters.of(crawler),
        retried=DeadLettersConfig.from_settings(crawler.settings).retry_http_codes,
    )

    def opened(spider: Spider) -> None:
        assert crawler.engine is not None
        logins.opened(spider, crawler.engine.crawl)

    crawler.signals.connect(opened, signal=signals.spider_opened, weak=False)
    return logins
