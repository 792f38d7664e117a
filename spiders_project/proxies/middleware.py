"""Send requests through ``PROXIES``; ban a proxy for the cluster when a site blocks it.

``PROXIES`` (comma-separated proxy URLs) or ``PROXIES_FILE`` (one per line,
``#`` comments) turn it on. Each request goes through a proxy the pool
(``pool.ProxyPool``) says is not banned: the next one in turn
(``PROXY_MODE=rotate``, the default) or the one its politeness group keeps
(``host``: sticky per host, moving only while that proxy is banned). A
request of a cookie jar pinned to a proxy (``meta.PROXY_PIN``, set by the
cookie middleware: a session stays on the proxy it was made through) goes
through that one.

Scrapy's HttpProxyMiddleware (750) does the rest from ``meta["proxy"]``
(the Proxy-Authorization header from the URL's credentials). A request
whose ``meta["proxy"]`` its spider set is left alone.

A proxy is banned for ``PROXY_BAN_TIME`` seconds, for every worker, when an
answer through it is a block (``BAN_HTTP_CODES``, ``BAN_BODY_PATTERNS``:
``politeness.bans``) or when ``PROXY_MAX_FAILURES`` connections through it
fail in a row. The blocked answer itself is a failed attempt
(``politeness.retries``): retried, through another proxy, never an item.

Credentials are never logged and never stored: proxies are named
``scheme://host:port`` everywhere, and :func:`forget_proxy` takes the proxy
and its Proxy-Authorization header off a request before the frontier or a
dead letter keeps it.
"""

from __future__ import annotations

from typing import Any

from scrapy import Request
from scrapy.core.downloader.handlers.http11 import TunnelError
from scrapy.crawler import Crawler
from scrapy.exceptions import (
    DownloadConnectionRefusedError,
    DownloadFailedError,
    DownloadTimeoutError,
    NotConfigured,
)
from scrapy.http import Response
from twisted.internet.error import ConnectError, TimeoutError
from twisted.web._newclient import ResponseNeverReceived

from spiders_project.crawl.meta import PROXY_NAME, PROXY_PIN
from spiders_project.politeness.bans import BanRules
from spiders_project.politeness.delays import HostPoliteness
from spiders_project.proxies.config import ProxyConfig
from spiders_project.proxies.pool import ProxyPool

# Failures of the connection to (or through) a proxy, not of the site's answer.
CONNECTION_ERRORS: tuple[type[BaseException], ...] = (
    ConnectError,
    TimeoutError,
    TunnelError,
    ResponseNeverReceived,
    DownloadConnectionRefusedError,
    DownloadTimeoutError,
    DownloadFailedError,
)


def forget_proxy(request: Request) -> Request:
    """``request`` without the pool's proxy (its credentials): for anything stored."""
    meta = request.meta
    meta.pop(PROXY_PIN, None)  # its jar's, set again as it goes out
    if meta.get(PROXY_NAME):
        for key in (PROXY_NAME, "proxy", "_auth_proxy"):
            meta.pop(key, None)
        request.headers.pop(b"Proxy-Authorization", None)
    return request


class ProxyMiddleware:
    """Downloader middleware at 710, before Scrapy's HttpProxyMiddleware (750)."""

    def __init__(self, crawler: Crawler, pool: ProxyPool) -> None:
        self.crawler = crawler
        self.pool = pool
        self.bans = BanRules.from_settings(crawler.settings)
        self.groups = HostPoliteness.of(crawler)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> ProxyMiddleware:
        if not ProxyConfig.from_settings(crawler.settings).proxies:
            raise NotConfigured  # no message: Scrapy would log a warning for it
        return cls(crawler, ProxyPool.of(crawler))

    async def process_request(self, request: Request) -> None:
        if "proxy" in request.meta and not request.meta.get(PROXY_NAME):
            return  # the spider chose its own proxy
        proxy = self.pool.by_name.get(request.meta.get(PROXY_PIN) or "")
        if proxy is None:
            proxy = await self.pool.choose(self.groups.key_of(request.url))
        request.meta["proxy"] = proxy.url
        request.meta[PROXY_NAME] = proxy.name
        assert self.crawler.stats is not None
        self.crawler.stats.inc_value(f"proxies/requests/{proxy.name}")

    def process_response(self, request: Request, response: Response) -> Response:
        name = request.meta.get(PROXY_NAME)
        if name:
            blocked = self.bans.reason(response)
            if blocked is not None:
                self.pool.ban(name, f"{blocked} from {request.url}")
            else:
                self.pool.succeeded(name)
        return response

    def process_exception(self, request: Request, exception: Exception) -> Any:
        name = request.meta.get(PROXY_NAME)
        if name and isinstance(exception, CONNECTION_ERRORS):
            self.pool.failed(name, type(exception).__name__)
        return None
