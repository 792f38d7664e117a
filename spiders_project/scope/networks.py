"""No crossing from public to private networks (SSRF): a hostile page cannot aim the crawler inward.

A page on a public site can link to ``http://169.254.169.254/`` (a cloud's
metadata service), ``http://10.0.0.5/admin`` or a name that resolves to one,
or redirect there. A request *reached from a public address* (a link or a
redirect on a page that came from one) is refused when the address it would
connect to is loopback, private, link-local, shared (100.64/10), reserved,
multicast or otherwise not globally routable. Seeds on non-public addresses
are allowed, and so is what is crawled from them: the operator chose them.

How:

- :class:`NetworkGuardMiddleware` (downloader, 650) marks a request whose
  response came from a public address (``response.ip_address``), before
  RedirectMiddleware copies its meta to a redirect; ``seed_limits.SeedScope``
  (the spider middleware) gives the mark to the links of its pages. A marked
  request to an IP literal that is not public is refused before anything is sent.
- The check runs on the address actually connected to, not only on the name
  (DNS rebinding): :class:`GuardedResolver` (``TWISTED_DNS_RESOLVER``) is the
  resolver Scrapy connects with; the download handler tells the guard, right
  before each connection, whether its host is guarded
  (:meth:`NetworkGuard.connecting`; the connection is opened in the same call,
  so no other request can come between), and the resolver refuses a
  non-public address for a guarded host. The middleware turns that failure
  into a refusal (no retry, no dead letter).
- A marked response whose peer address is not public (a pooled connection
  opened for an unmarked request) is dropped before the spider sees it.

Through a proxy, the proxy connects: only IP literals are checked here.
Rendered requests (Chromium resolves for itself) are checked by resolving
their host just before the render; that is not proof against rebinding.

``ALLOW_PRIVATE_NETWORKS`` turns the guard off. ``NETWORK_GUARD_PUBLIC``
lists networks to treat as public anyway (CIDRs: your own ranges, or a test's
127.0.0.2). Refusals are counted (``scope/private_network``) and logged once
per host.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
from typing import Any
from urllib.parse import urlsplit

from scrapy import Request
from scrapy.crawler import Crawler
from scrapy.exceptions import IgnoreRequest, NotConfigured
from scrapy.http import Response
from scrapy.resolver import CachingThreadedResolver
from scrapy.settings import BaseSettings
from twisted.internet.defer import Deferred
from twisted.internet.error import DNSLookupError

from spiders_project.config import SettingsReader
from spiders_project.crawl.meta import GUARDED

logger = logging.getLogger(__name__)


Network = ipaddress.IPv4Network | ipaddress.IPv6Network


_PROCESS_GUARD: NetworkGuard | None = None


class PrivateAddressRefused(DNSLookupError):
    """A guarded host resolved to an address that is not public."""


class NetworkGuard:
    """What is public, which hosts are guarded now, and the refusals (one per worker)."""

    def __init__(self, enabled: bool, public: list[Network]) -> None:
        self.enabled = enabled
        self.public = public
        # hostname -> whether the connection about to be opened to it is guarded.
        self._guarded: dict[str, bool] = {}
        # hostname -> the address it was refused for, until a request hears of it.
        self.refused: dict[str, str] = {}
        self._logged: set[str] = set()
        self.stats: Any = None

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> NetworkGuard:
        read = SettingsReader(settings)
        public: list[Network] = []
        for text in read.getlist("NETWORK_GUARD_PUBLIC"):
            try:
                public.append(ipaddress.ip_network(str(text).strip(), strict=False))
            except ValueError:
                read.fail("NETWORK_GUARD_PUBLIC", f"{text!r} is not a network (CIDR)")
        return cls(not read.getbool("ALLOW_PRIVATE_NETWORKS"), public)

    @classmethod
    def of(cls, crawler: Crawler) -> NetworkGuard:
        """The process' guard, with this crawler's stats for its refusals."""
        guard = cls.of_process(crawler.settings)
        guard.stats = crawler.stats
        return guard

    @classmethod
    def of_process(cls, settings: BaseSettings) -> NetworkGuard:
        """The one guard of this process: Scrapy builds the resolver for the
        process (before any crawler), and the download handler and the
        middleware of its crawler must tell it about the same connections."""
        global _PROCESS_GUARD
        if _PROCESS_GUARD is None:
            _PROCESS_GUARD = cls.from_settings(settings)
        return _PROCESS_GUARD

    def is_public(self, address: str) -> bool:
        try:
            ip = ipaddress.ip_address(address.strip("[]").split("%", 1)[0])
        except ValueError:
            return False
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        if any(ip in network for network in self.public):
            return True
        return ip.is_global and not ip.is_multicast

    def connecting(self, hostname: str, guarded: bool) -> None:
        """Say whether the connection about to be opened to ``hostname`` is guarded.

        Kept for the last ``REMEMBERED`` hosts only: the resolver asks within
        the same call, so an old entry is never needed (a host it has
        forgotten is guarded, which only ever refuses more).
        """
        self._guarded.pop(hostname, None)
        self._guarded[hostname] = guarded
        _bound(self._guarded)

    def allows(self, hostname: str, address: str) -> bool:
        """Whether a connection to ``hostname`` may go to ``address`` (the resolver asks)."""
        if not self.enabled or not self._guarded.get(hostname, True):
            return True
        if self.is_public(address):
            return True
        self.refused[hostname] = address
        _bound(self.refused)
        return False

    def refuse(self, request: Request, host: str, address: str, how: str) -> IgnoreRequest:
        """Count and (once per host) log a refusal; the exception that drops the request."""
        if self.stats is not None:
            self.stats.inc_value("scope/private_network")
        if host not in self._logged and len(self._logged) < REMEMBERED:
            self._logged.add(host)
            logger.warning(
                "Refused %s: %s is %s, not public, and was reached from a public page "
                "(ALLOW_PRIVATE_NETWORKS allows it); further refusals of it are counted only",
                request.url,
                host,
                f"{address} ({how})" if address != host else how,
            )
        return IgnoreRequest(f"{host} is not a public address")


class GuardedResolver(CachingThreadedResolver):
    """Scrapy's default resolver, refusing non-public addresses for guarded hosts.

    The address checked is the one the connection will use: Scrapy's cache
    and the system resolver answer first, then this check, then the connect.
    """

    guard: NetworkGuard

    @classmethod
    def from_crawler(cls, crawler: Any, reactor: Any) -> GuardedResolver:
        # ``crawler`` is the CrawlerProcess here: the reactor is the process'.
        resolver = super().from_crawler(crawler, reactor)
        resolver.guard = NetworkGuard.of_process(crawler.settings)
        return resolver

    def getHostByName(self, name: str, timeout: Any = ()) -> Deferred[str]:  # noqa: N802
        found: Deferred[str] = super().getHostByName(name, timeout)
        found.addCallback(self._checked, name)
        return found

    def _checked(self, address: str, name: str) -> str:
        if self.guard.allows(name, address):
            return address
        raise PrivateAddressRefused(f"{name} resolves to {address}, which is not public")


class NetworkGuardMiddleware:
    """Marks requests reached from public addresses and refuses their way inward.

    At 650: after RetryMiddleware and before RedirectMiddleware (600) on the
    way back, so a redirect inherits the mark and a refusal is never retried.
    """

    def __init__(self, guard: NetworkGuard) -> None:
        self.guard = guard

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> NetworkGuardMiddleware:
        guard = NetworkGuard.of(crawler)
        if not guard.enabled:
            raise NotConfigured("ALLOW_PRIVATE_NETWORKS is on")
        return cls(guard)

    async def process_request(self, request: Request) -> None:
        if not request.meta.get(GUARDED):
            return
        host = urlsplit(request.url).hostname or ""
        if _is_ip(host):
            if not self.guard.is_public(host):
                raise self.guard.refuse(request, host, host, "an address")
            return
        if request.meta.get("playwright") and not request.meta.get("proxy"):
            # Chromium resolves for itself: check the name now (not rebinding-proof).
            loop = asyncio.get_running_loop()
            try:
                infos = await loop.getaddrinfo(host, None, type=socket.SOCK_STREAM)
            except OSError:
                return  # the render fails as it would have
            for info in infos:
                address = str(info[4][0])
                if not self.guard.is_public(address):
                    raise self.guard.refuse(request, host, address, "resolved")

    def process_response(self, request: Request, response: Response) -> Response:
        address = response.ip_address
        if address is None or request.meta.get("proxy"):
            return response
        public = self.guard.is_public(str(address))
        if request.meta.get(GUARDED):
            if not public:
                host = urlsplit(request.url).hostname or ""
                raise self.guard.refuse(request, host, str(address), "connected")
        elif public:
            request.meta[GUARDED] = True  # its redirects and links stay public
        return response

    def process_exception(self, request: Request, exception: Exception) -> None:
        host = urlsplit(request.url).hostname or ""
        address = self.guard.refused.pop(host, None)
        if address is not None and request.meta.get(GUARDED):
            raise self.guard.refuse(request, host, address, "resolved")


# Hosts the guard remembers at most, per table.
REMEMBERED = 10_000


def _bound(table: dict[str, Any]) -> None:
    """Forget the oldest entries of ``table`` beyond ``REMEMBERED``."""
    while len(table) > REMEMBERED:
        del table[next(iter(table))]


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True
