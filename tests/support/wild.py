"""A site with what the real web has: robots.txt, tracking links, traps, flaky pages, sitemaps.

Served by the demo's asyncio server (``respond`` replaces its pages), on one
port. What it serves:

- ``/robots.txt``: ``robots`` (by default it disallows ``/private/``);
- ``/`` links to ``/docs/1``, ``/private/1``, ``/cal/2024/1``, ``/flaky/1``, ``/loop/`` and
  to ``/docs/1`` again with tracking parameters (``?utm_source=...``, ``gclid``);
- ``/docs/<n>`` (``n < docs``) links to ``/docs/2n`` and ``/docs/2n+1``, each
  also with a ``utm_`` variant;
- ``/private/<n>``: pages robots.txt forbids, linked from ``/``;
- ``/cal/<year>/<month>``: an endless calendar, each month linking to the next
  and the previous one;
- ``/challenge/<n>``: a 200 "solve this CAPTCHA" page the first ``n`` times, then
  the real page; ``/forbidden/<n>``: always 403;
- ``/loop/``: links to ``a/``, relative, so ``/loop/a/a/a/...`` never ends;
- ``/flaky/<n>``: answers 503 ``flaky_times`` times, then 200;
- ``/bad.xml.gz``: a broken gzip stream;
- ``/redirect?to=<url>``: a 302 to that URL; ``links`` are added to ``/``;
- ``/sitemap_index.xml`` names ``/sitemap1.xml.gz`` and ``/sitemap2.xml.gz``,
  gzip sitemaps listing ``/sm/<n>`` (``sitemap_pages`` of them, half each);
- anything else: 404.

Requests through a test proxy (``tests.support.proxy``) carry its name; a
proxy in ``ban_via`` gets a "CAPTCHA" page after that many requests, and every
proxy gets one until ``ban_all_via_until`` (or for ``ban_all_via_for`` seconds
from the first request through a proxy).

Each response waits ``latency`` seconds. The site measures what a crawler
made it do: every request's arrival (``log``), and the most requests it had
in flight at once (``max_in_flight``).
"""

from __future__ import annotations

import asyncio
import gzip
import html
import threading
import time
from collections import Counter
from typing import Any
from urllib.parse import unquote

from spiders_project.demo.site import SiteServer

HTML = "text/html; charset=utf-8"
DEFAULT_ROBOTS = "User-agent: *\nDisallow: /private/\n"


def spacing_faults(times: list[float], delay: float, slack: float = 0.01) -> list[str]:
    """What breaks a host's spacing of ``delay`` between sorted arrival ``times``.

    Lag sits between a granted turn and the site's log: the worker's event
    loop before the bytes leave, and the site's handler thread before it
    notes the arrival. On a loaded 2-core CI machine one arrival was logged
    0.14-0.16 s late: its gap grew and the next one shrank by as much (0.37
    then 0.18, and 0.39 then 0.14, for a 0.2 s delay). Lag makes an arrival
    late, never early, so a gap shorter than the delay must follow one longer
    by as much (the two together at least ``2 * delay``, less ``slack``), and no
    gap may fall under a quarter of the delay: two sends granted together
    fail both.
    """
    faults = []
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    for i, gap in enumerate(gaps):
        if gap < delay / 4:
            faults.append(f"gap {i}: {gap:.3f} s, two sends together")
        elif gap < delay - slack and (i == 0 or gaps[i - 1] + gap < 2 * delay - slack):
            before = f"{gaps[i - 1]:.3f}" if i else "none"
            faults.append(f"gap {i}: {gap:.3f} s < {delay} after {before} s")
    return faults


class WildSite(SiteServer):
    __test__ = False

    def __init__(
        self,
        *,
        docs: int = 16,
        latency: float = 0.0,
        robots: str | None = DEFAULT_ROBOTS,
        flaky_times: int = 0,
        sitemap_pages: int = 10,
        host: str = "127.0.0.1",
        **kwargs: Any,
    ) -> None:
        super().__init__(pages=1, host=host, dead_links=False, offsite_links=False, **kwargs)
        self.docs = docs
        self.wild_latency = latency
        self.robots = robots
        self.flaky_times = flaky_times
        self.sitemap_pages = sitemap_pages
        # More links on the home page (absolute URLs elsewhere, say).
        self.links: list[str] = []
        self._wild_lock = threading.Lock()
        self._arrivals: list[tuple[float, str, int]] = []
        self._flaky: Counter[str] = Counter()
        self._in_flight = 0
        self.max_in_flight = 0
        # Proxy bans: a proxy named here gets a CAPTCHA page after that many
        # requests; every proxy gets one until ban_all_via_until (monotonic).
        self.ban_via: dict[str, int] = {}
        self.ban_all_via_until = 0.0
        # Or, for this many seconds from the first request through a proxy.
        self.ban_all_via_for = 0.0
        self._via_counts: Counter[str] = Counter()
        self._via_log: list[tuple[float, str, int, str, bool]] = []

    def extra_headers(self, target: str, status: int) -> list[tuple[str, str]]:
        path, _, query = _split_via(target)[0].partition("?")
        if path == "/redirect" and query.startswith("to="):
            return [("Location", unquote(query[3:]))]
        return []

    def __enter__(self) -> WildSite:
        self.start()
        return self

    # --- what tests ask ---------------------------------------------------------------
    def log(self) -> list[tuple[float, str, int]]:
        """(time.monotonic() of arrival, path with query, status) of every request."""
        with self._wild_lock:
            return list(self._arrivals)

    def requested(self, prefix: str = "/") -> Counter[str]:
        """Requests per path with query, for those starting with ``prefix``."""
        return Counter(p for _, p, _ in self.log() if p.startswith(prefix))

    def doc_urls(self) -> set[str]:
        return {f"{self.url}docs/{n}" for n in range(1, self.docs)}

    def sitemap_urls(self) -> set[str]:
        return {f"{self.url}sm/{n}" for n in range(self.sitemap_pages)}

    # --- serving ------------------------------------------------------------------------
    async def respond(
        self, site: int, method: str, target: str, host: str | None, arrived: float
    ) -> tuple[int, str, bytes]:
        target, via = _split_via(target)
        with self._wild_lock:
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
            if via:
                self._via_counts[via] += 1
                if self.ban_all_via_for and not self.ban_all_via_until:
                    # The window starts with the crawl, however long the worker took to start.
                    self.ban_all_via_until = time.monotonic() + self.ban_all_via_for
            banned = via and (
                self._via_counts[via] > self.ban_via.get(via, 1 << 30)
                or time.monotonic() < self.ban_all_via_until
            )
        status = 500
        try:
            if self.wild_latency:
                await asyncio.sleep(self.wild_latency)
            if banned:
                status, ctype, body = 200, HTML, b"<html><title>Check</title>CAPTCHA</html>"
            else:
                status, ctype, body = self._wild_route(target)
        finally:
            with self._wild_lock:
                self._in_flight -= 1
                self._arrivals.append((arrived, target, status))
                self._via_log.append((arrived, target, status, via, bool(banned)))
        return status, ctype, body

    def via_log(self) -> list[tuple[float, str, int, str, bool]]:
        """(arrival, path with query, status, proxy name or "", whether it was a ban page)."""
        with self._wild_lock:
            return list(self._via_log)

    def _page(self, title: str, hrefs: list[str]) -> tuple[int, str, bytes]:
        links = "".join(f'<a href="{html.escape(h)}">{html.escape(h)}</a>\n' for h in hrefs)
        body = f"<html><head><title>{html.escape(title)}</title></head><body>{links}</body></html>"
        return 200, HTML, body.encode()

    def _wild_route(self, target: str) -> tuple[int, str, bytes]:
        path = target.split("?", 1)[0]
        parts = [p for p in path.split("/") if p]
        if path == "/robots.txt":
            if self.robots is None:
                return 404, "text/plain", b"no robots"
            return 200, "text/plain", self.robots.encode()
        if path == "/redirect":
            return 302, HTML, b"<html><title>Moved</title></html>"
        if path == "/":
            return self._page(
                "Home",
                [
                    *self.links,
                    "/docs/1",
                    "/docs/1?utm_source=home&utm_medium=link",
                    "/docs/1?gclid=abc",
                    "/private/1",
                    "/cal/2024/1",
                    "/flaky/1",
                    "/loop/",
                ],
            )
        if len(parts) == 2 and parts[0] == "docs" and parts[1].isdigit():
            n = int(parts[1])
            if not 0 < n < self.docs:
                return 404, "text/plain", b"no such doc"
            hrefs = []
            for child in (2 * n, 2 * n + 1):
                if child < self.docs:
                    hrefs += [f"/docs/{child}", f"/docs/{child}?utm_campaign=c{n}&fbclid=x"]
            return self._page(f"Doc {n}", hrefs)
        if len(parts) == 2 and parts[0] == "private":
            return self._page("Private", [])
        if len(parts) == 3 and parts[0] == "cal" and parts[1].isdigit() and parts[2].isdigit():
            year, month = int(parts[1]), int(parts[2])
            nxt = (year + month // 12, month % 12 + 1)
            prev = (year - (month == 1), (month - 2) % 12 + 1)
            return self._page(
                f"Calendar {year}-{month}", [f"/cal/{nxt[0]}/{nxt[1]}", f"/cal/{prev[0]}/{prev[1]}"]
            )
        if len(parts) == 2 and parts[0] == "flaky":
            with self._wild_lock:
                self._flaky[path] += 1
                seen = self._flaky[path]
            if seen <= self.flaky_times:
                return 503, "text/plain", b"try again later"
            return self._page("Flaky", [])
        if path == "/sitemap_index.xml":
            maps = "".join(
                f"<sitemap><loc>{self.url}sitemap{i}.xml.gz</loc></sitemap>" for i in (1, 2)
            )
            body = (
                '<?xml version="1.0" encoding="UTF-8"?>'
                f'<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{maps}'
                "</sitemapindex>"
            )
            return 200, "application/xml", body.encode()
        if path in ("/sitemap1.xml.gz", "/sitemap2.xml.gz"):
            half = (
                range(0, self.sitemap_pages, 2) if "1" in path else range(1, self.sitemap_pages, 2)
            )
            urls = "".join(f"<url><loc>{self.url}sm/{n}</loc></url>" for n in half)
            body = (
                '<?xml version="1.0" encoding="UTF-8"?>'
                f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{urls}</urlset>'
            )
            return 200, "application/gzip", gzip.compress(body.encode())
        if len(parts) == 2 and parts[0] == "challenge" and parts[1].isdigit():
            with self._wild_lock:
                self._flaky[path] += 1
                seen = self._flaky[path]
            if seen <= int(parts[1]):
                return 200, HTML, b"<html><title>Check</title>Please solve this CAPTCHA</html>"
            return self._page(f"Challenge {parts[1]} passed", [])
        if len(parts) == 2 and parts[0] == "forbidden":
            return 403, HTML, b"<html><title>Forbidden</title>Go away</html>"
        if parts and parts[0] == "loop":
            return self._page("Loop", ["a/"])  # relative: /loop/a/, /loop/a/a/, ...
        if path == "/bad.xml.gz":
            return 200, "application/gzip", b"\x1f\x8b\x08\x00 not really gzip"
        if len(parts) == 2 and parts[0] == "sm":
            return self._page(f"Sitemap page {parts[1]}", [])
        return 404, "text/plain", b"not found"


def _split_via(target: str) -> tuple[str, str]:
    """The target without the ``__via=<proxy>`` a test proxy added, and that proxy's name."""
    path, sep, query = target.partition("?")
    if "__via=" not in query:
        return target, ""
    pairs = query.split("&")
    via = next(p[len("__via=") :] for p in pairs if p.startswith("__via="))
    rest = "&".join(p for p in pairs if not p.startswith("__via="))
    return (f"{path}?{rest}" if rest else path), via
