"""The unit of politeness: what one delay and one cap apply to (``POLITENESS_KEY``).

- ``host`` (the default): ``host[:port]`` as ``hosts.host_of`` names it;
- ``domain``: the registrable domain (``shop.example.co.uk`` and
  ``www.example.co.uk`` are both ``example.co.uk``), from the Public Suffix
  List that ``tldextract`` ships (its bundled snapshot: it never downloads a
  newer one at run time), private suffixes included, so ``a.github.io`` and
  ``b.github.io`` stay apart. A host without a public suffix (an IP
  address, ``localhost``) is its own group;
- ``ip``: the address the host resolves to (IPv4 first), so virtual hosts on
  one server share its delay and cap. Looked up once per host and kept
  ``IP_CACHE_TTL`` seconds; a name that does not resolve is its own group (its
  fetch fails anyway). The lookup is synchronous, when a link is enqueued: it
  holds the worker for as long as DNS takes, once per host and 5 minutes, so
  ``ip`` suits crawls of a bounded set of hosts, not the open web.

The frontier's queues, the ready-set, the cap, the dispatch gate, Retry-After
pauses and Crawl-delay are all keyed by this group.
"""

from __future__ import annotations

import ipaddress
import socket
import time
from functools import lru_cache

from spiders_project.crawl.hosts import host_of
from spiders_project.crawl.suffixes import public_suffixes

MODES = ("host", "domain", "ip")
IP_CACHE_TTL = 300.0
IP_CACHE_SIZE = 100_000

# The PSL snapshot inside the package; no network, no cache directory.
_EXTRACT = public_suffixes()


def _hostname(host: str) -> str:
    """``host[:port]`` without its port (IPv6 literals keep their brackets)."""
    if host.startswith("["):
        return host.partition("]")[0] + "]"
    return host.partition(":")[0]


@lru_cache(maxsize=65536)
def registrable_domain(hostname: str) -> str:
    """The registrable domain of ``hostname``, or ``hostname`` when it has no public suffix."""
    if hostname.startswith("["):
        return hostname
    try:
        ipaddress.ip_address(hostname)
        return hostname
    except ValueError:
        pass
    parts = _EXTRACT(hostname)
    if not parts.suffix or not parts.domain:
        return hostname
    return f"{parts.domain}.{parts.suffix}"


class PolitenessKey:
    """``POLITENESS_KEY``'s grouping of URLs (and of hosts named in settings)."""

    def __init__(self, mode: str = "host") -> None:
        if mode not in MODES:
            raise ValueError(f"POLITENESS_KEY must be one of {', '.join(MODES)}")
        self.mode = mode
        self._ips: dict[str, tuple[str, float]] = {}

    def of_url(self, url: str) -> str:
        return self.of_host(host_of(url))

    def of_host(self, host: str) -> str:
        """The group of a ``host[:port]`` in ``host_of``'s form."""
        if self.mode == "host":
            return host
        hostname = _hostname(host)
        if self.mode == "domain":
            return registrable_domain(hostname)
        return self._ip(hostname)

    def _ip(self, hostname: str) -> str:
        bare = hostname.strip("[]")
        try:
            return str(ipaddress.ip_address(bare))
        except ValueError:
            pass
        now = time.monotonic()
        cached = self._ips.get(hostname)
        if cached is not None and cached[1] > now:
            return cached[0]
        try:
            infos = socket.getaddrinfo(hostname, None, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError):
            address = hostname
        else:
            addresses = [str(info[4][0]) for info in infos]
            v4 = [a for a in addresses if ":" not in a]
            address = (v4 or addresses or [hostname])[0]
        if len(self._ips) >= IP_CACHE_SIZE:
            self._ips.clear()  # a broad crawl's millions of hosts must not pile up here
        self._ips[hostname] = (address, now + IP_CACHE_TTL)
        return address
