"""The local sites tests crawl: the demo's generated site with a request log, and JS pages.

``TestSite`` is the demo's ``SiteServer`` (a known page set with duplicate,
fragment, relative, dead, off-site and flaky links) that also keeps every
request it answered, so tests can assert what a crawl really sent: which
hosts, in which order, how far apart. ``JsSite`` serves, on the same server,
pages whose content only a browser sees (their HTML is in ``js_pages.py``).
"""

from __future__ import annotations

import asyncio
import contextvars
import json
from collections import Counter
from typing import Any

from spiders_project.demo.site import OFFSITE_HOST, SiteServer
from tests.support.js_pages import BUSY, HANG, LEAK, MIXED, PLAIN, SHELL, TRACKER_HOST, png

__all__ = ["OFFSITE_HOST", "TRACKER_HOST", "JsSite", "TestSite"]


# The address a request came from, set for each connection's task (asyncio
# gives every connection a task of its own, and a task its own context).
_client: contextvars.ContextVar[str] = contextvars.ContextVar("client", default="")


class TestSite(SiteServer):
    """``SiteServer`` plus ``request_log()``, ``clients()`` and ``offsite_requests()``."""

    __test__ = False  # a helper, not a test class, whatever pytest thinks of its name

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._log: list[tuple[float, str, str, int]] = []
        self._clients: list[str] = []

    async def _connection(
        self, site: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        peer = writer.get_extra_info("peername")
        _client.set(str(peer[0]) if peer else "")
        await super()._connection(site, reader, writer)

    def served(
        self, arrived: float, host: str, site: int, method: str, target: str, status: int
    ) -> None:
        super().served(arrived, host, site, method, target, status)
        self._log.append((arrived, host, target, status))
        self._clients.append(_client.get())

    def request_log(self) -> list[tuple[float, str, str, int]]:
        """(monotonic arrival time, Host header, path with query, status) of every request."""
        with self._lock:
            return list(self._log)

    def clients(self) -> list[str]:
        """The address each request of ``request_log()`` came from, in the same order
        (on the network namespace test bed, which host asked)."""
        with self._lock:
            return list(self._clients)

    def offsite_requests(self) -> list[tuple[float, str, str, int]]:
        """Requests whose Host header names none of the served sites (a crawler bug)."""
        own = {self._netloc(p) for p in self._started_ports()}
        return [entry for entry in self.request_log() if entry[1] not in own]


class JsSite(SiteServer):
    """A site whose content exists only after its scripts run, on the same server as TestSite.

    ``/page/<n>`` (``/`` is page 0) is a shell titled "Loading": after ``delay`` ms a
    script fetches ``/api/page/<n>`` and writes the real title, an ``<h1
    id="content">`` and the links to the child pages ``2n+1`` and ``2n+2``. Without a
    browser a crawler sees no content and no links. Each page also asks for
    ``images`` images, a web font and a script from ``tracker.localhost`` (Chromium resolves any
    ``*.localhost`` to this machine), so resource blocking shows in the hit counts.

    ``/slow/<n>`` (``slow_pages`` of them) is the same page with its content fetched
    after ``slow_delay`` ms, well after the network went idle: only a wait for
    ``#content`` gets it.
    ``/plain/<n>`` has its title and links in the HTML, plus a script that would
    fetch ``/api/plain/<n>`` if anything ran it. ``/hang`` includes a script that
    never answers, so the page never finishes loading; ``/busy`` loads, then its
    script spins forever, so the renderer never answers again.

    ``api_latency`` and ``asset_latency`` (seconds) delay the answers to the script's
    fetch() and to the image, font and tracker requests, as a distant API, CDN or
    third party would.

    Served by the demo's asyncio server (``respond`` replaces its pages and waits
    the latencies without holding a thread); every request is counted by
    ``(host, path)``.
    """

    __test__ = False

    def __init__(
        self,
        pages: int = 15,
        plain_pages: int = 3,
        slow_pages: int = 1,
        delay: int = 150,
        slow_delay: int = 1500,
        api_latency: float = 0.0,
        asset_latency: float = 0.0,
        image_size: int = 64,
        images: int = 1,
        leak_pages: int = 0,
        leak_mb: int = 300,
        mixed_pages: int = 0,
    ) -> None:
        super().__init__(pages=1, dead_links=False, offsite_links=False)
        self.js_pages = pages
        self.plain_pages = plain_pages
        self.slow_pages = slow_pages
        self.delay = delay
        self.slow_delay = slow_delay
        self.api_latency = api_latency
        self.asset_latency = asset_latency
        self._image = png(image_size)
        self.images = images
        self.leak_pages = leak_pages
        self.leak_mb = leak_mb
        self.mixed_pages = mixed_pages
        self._js_hits: Counter[tuple[str, str]] = Counter()
        self._js_log: list[tuple[float, str, str]] = []

    def __enter__(self) -> JsSite:
        self.start()
        return self

    async def respond(
        self, site: int, method: str, target: str, host: str | None, arrived: float
    ) -> tuple[int, str, bytes]:
        path = target.split("?", 1)[0]
        name = (host or "").rsplit(":", 1)[0]
        with self._lock:
            self._js_hits[(name, path)] += 1
            self._js_log.append((arrived, name, path))
        if path == "/never.js":
            await asyncio.Event().wait()  # until stop() cancels the connection
        if path.startswith("/api/") and self.api_latency:
            await asyncio.sleep(self.api_latency)
        elif path.startswith(("/img/", "/font/", "/t.js")) and self.asset_latency:
            await asyncio.sleep(self.asset_latency)
        return self._js_route(path)

    # --- what tests ask --------------------------------------------------------------
    def page_url(self, n: int, kind: str = "page") -> str:
        return self.url if (kind, n) == ("page", 0) else f"{self.url}{kind}/{n}"

    def js_urls(self) -> set[str]:
        return {self.page_url(n) for n in range(self.js_pages)}

    def plain_urls(self) -> set[str]:
        return {self.page_url(n, "plain") for n in range(self.plain_pages)}

    def mixed_urls(self) -> set[str]:
        """``/m/<n>``: plain HTML, except every tenth page (n % 10 == 9), a JS shell."""
        return {self.page_url(n, "m") for n in range(self.mixed_pages)}

    def mixed_js_urls(self) -> set[str]:
        return {self.page_url(n, "m") for n in range(self.mixed_pages) if n % 10 == 9}

    def leak_urls(self) -> set[str]:
        return {self.page_url(n, "leak") for n in range(self.leak_pages)}

    def slow_urls(self) -> set[str]:
        return {self.page_url(n, "slow") for n in range(self.slow_pages)}

    def _total(self, kind: str) -> int:
        totals = {"page": self.js_pages, "slow": self.slow_pages, "plain": self.plain_pages}
        return {**totals, "leak": self.leak_pages, "m": self.mixed_pages}[kind]

    def hits(self) -> Counter[tuple[str, str]]:  # type: ignore[override]
        """Requests served so far, by (host without port, path)."""
        with self._lock:
            return Counter(self._js_hits)

    def request_log(self) -> list[tuple[float, str, str]]:  # type: ignore[override]
        """(time.monotonic(), host, path) of every request, in arrival order."""
        with self._lock:
            return list(self._js_log)

    def count(self, prefix: str, host: str = "127.0.0.1") -> int:
        return sum(n for (h, p), n in self.hits().items() if h == host and p.startswith(prefix))

    # --- serving ---------------------------------------------------------------------
    def _children(self, kind: str, n: int, total: int) -> list[str]:
        return [self.page_url(c, kind) for c in (2 * n + 1, 2 * n + 2) if c < total]

    def _js_route(self, path: str) -> tuple[int, str, bytes]:
        parts = path.strip("/").split("/")
        if len(parts) == 3 and parts[0] == "api" and parts[2].isdigit():
            kind, n = parts[1], parts[2]
            if kind in ("page", "slow", "m"):
                title = {"page": "JS page", "slow": "Slow page", "m": "JS mixed"}[kind]
                links = self._children(kind, int(n), self._total(kind))
                body = json.dumps({"title": f"{title} {n}", "links": links}).encode()
                return 200, "application/json", body
            return 200, "application/json", b"{}"
        kind, n = (parts[0], parts[1]) if len(parts) == 2 else ("page", "0" if path == "/" else "")
        if path.startswith("/img/"):
            return 200, "image/png", self._image
        if path.startswith("/font/"):
            return 200, "font/woff2", b"wOF2" + b"\x00" * 2048
        if path == "/t.js":
            return 200, "application/javascript", b"window.tracked = true;"
        if path == "/hang":
            return 200, "text/html; charset=utf-8", HANG.encode()
        if path == "/busy":
            return 200, "text/html; charset=utf-8", BUSY.encode()
        if kind in ("page", "slow") and n.isdigit() and int(n) < self._total(kind):
            delay = self.delay if kind == "page" else self.slow_delay
            images = "".join(f'<img src="/img/{n}-{i}.png" alt="">' for i in range(self.images))
            body = SHELL.format(
                tracker=TRACKER_HOST,
                port=self.port,
                images=images,
                api=f"/api/{kind}/{n}",
                delay=delay,
            )
            return 200, "text/html; charset=utf-8", body.encode()
        if kind == "m" and n.isdigit() and int(n) < self.mixed_pages:
            children = self._children("m", int(n), self.mixed_pages)
            if int(n) % 10 != 9:
                links = "".join(f'<a href="{u}">{u}</a>' for u in children)
                return 200, "text/html; charset=utf-8", MIXED.format(n=n, links=links).encode()
            body = SHELL.format(
                tracker=TRACKER_HOST, port=self.port, images="", api=f"/api/m/{n}", delay=self.delay
            )
            return 200, "text/html; charset=utf-8", body.encode()
        if kind == "leak" and n.isdigit() and int(n) < self.leak_pages:
            following = int(n) + 1
            link = ""
            if following < self.leak_pages:
                href = self.page_url(following, "leak")
                link = (
                    'var a = document.createElement("a"); '
                    f'a.href = "{href}"; a.textContent = "next"; '
                    'document.getElementById("app").appendChild(a);'
                )
            body = LEAK.format(mb=self.leak_mb, delay=self.slow_delay, n=n, link=link)
            return 200, "text/html; charset=utf-8", body.encode()
        if kind == "plain" and n.isdigit() and int(n) < self.plain_pages:
            links = "".join(
                f'<a href="{u}">{u}</a>' for u in self._children("plain", int(n), self.plain_pages)
            )
            return 200, "text/html; charset=utf-8", PLAIN.format(n=n, links=links).encode()
        return 404, "text/plain", b"not found"
