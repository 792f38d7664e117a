"""A local site whose content exists only after its scripts run, for tests and benchmarks.

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

The server is stdlib ``ThreadingHTTPServer`` on a background thread; every
request is counted by ``(host, path)``.
"""

from __future__ import annotations

import json
import struct
import threading
import time
import zlib
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType

TRACKER_HOST = "tracker.localhost"

_SHELL = """<!doctype html>
<html><head><meta charset="utf-8"><title>Loading</title>
<style>@font-face {{ font-family: Site; src: url(/font/site.woff2); }}
body {{ font-family: Site, sans-serif; }}</style>
<script async src="http://{tracker}:{port}/t.js"></script>
</head><body><div id="app">Loading...</div>{images}
<script>
setTimeout(function () {{
  fetch("{api}").then(function (r) {{ return r.json(); }}).then(function (d) {{
    document.title = d.title;
    var app = document.getElementById("app");
    app.textContent = "";
    var h = document.createElement("h1");
    h.id = "content";
    h.textContent = d.title;
    app.appendChild(h);
    d.links.forEach(function (href) {{
      var a = document.createElement("a");
      a.href = href;
      a.textContent = href;
      app.appendChild(a);
    }});
  }});
}}, {delay});
</script></body></html>
"""

_PLAIN = """<!doctype html>
<html><head><meta charset="utf-8"><title>Plain {n}</title></head><body>
<h1 id="content">Plain {n}</h1>{links}
<script>fetch("/api/plain/{n}");</script>
</body></html>
"""

_BUSY = """<!doctype html>
<html><head><title>Busy</title></head><body><p>spinning</p>
<script>window.addEventListener("load", function () {
  setTimeout(function () { for (;;) {} }, 50);
});</script></body></html>
"""

_HANG = """<!doctype html>
<html><head><title>Never loads</title></head><body><p>waiting</p>
<script src="/never.js"></script></body></html>
"""


def _png(size: int = 64) -> bytes:
    """A valid ``size`` x ``size`` RGB PNG with some noise, so decoding costs something."""
    rows = b"".join(
        b"\x00" + bytes((x * 7 + y * 13) % 256 for x in range(size * 3)) for y in range(size)
    )

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


class JsSite:
    """The site on ``127.0.0.1:<port>``; use as a context manager."""

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
    ) -> None:
        self.pages = pages
        self.plain_pages = plain_pages
        self.slow_pages = slow_pages
        self.delay = delay
        self.slow_delay = slow_delay
        self.api_latency = api_latency
        self.asset_latency = asset_latency
        self._image = _png(image_size)
        self.images = images
        self._lock = threading.Lock()
        self._hits: Counter[tuple[str, str]] = Counter()
        self._log: list[tuple[float, str, str]] = []
        self._release = threading.Event()  # lets /never.js requests end on stop()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    # --- lifecycle -------------------------------------------------------------------
    def __enter__(self) -> JsSite:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def stop(self) -> None:
        self._release.set()
        self._server.shutdown()
        self._server.server_close()

    # --- what tests ask --------------------------------------------------------------
    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def page_url(self, n: int, kind: str = "page") -> str:
        return self.url if (kind, n) == ("page", 0) else f"{self.url}{kind}/{n}"

    def js_urls(self) -> set[str]:
        return {self.page_url(n) for n in range(self.pages)}

    def plain_urls(self) -> set[str]:
        return {self.page_url(n, "plain") for n in range(self.plain_pages)}

    def slow_urls(self) -> set[str]:
        return {self.page_url(n, "slow") for n in range(self.slow_pages)}

    def _total(self, kind: str) -> int:
        return {"page": self.pages, "slow": self.slow_pages, "plain": self.plain_pages}[kind]

    def hits(self) -> Counter[tuple[str, str]]:
        """Requests served so far, by (host without port, path)."""
        with self._lock:
            return Counter(self._hits)

    def request_log(self) -> list[tuple[float, str, str]]:
        """(time.monotonic(), host, path) of every request, in arrival order."""
        with self._lock:
            return list(self._log)

    def count(self, prefix: str, host: str = "127.0.0.1") -> int:
        return sum(n for (h, p), n in self.hits().items() if h == host and p.startswith(prefix))

    # --- serving ---------------------------------------------------------------------
    def _children(self, kind: str, n: int, total: int) -> list[str]:
        return [self.page_url(c, kind) for c in (2 * n + 1, 2 * n + 2) if c < total]

    def _route(self, path: str) -> tuple[int, str, bytes]:
        parts = path.strip("/").split("/")
        if len(parts) == 3 and parts[0] == "api" and parts[2].isdigit():
            kind, n = parts[1], parts[2]
            if kind in ("page", "slow"):
                title = "JS page" if kind == "page" else "Slow page"
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
            return 200, "text/html; charset=utf-8", _HANG.encode()
        if path == "/busy":
            return 200, "text/html; charset=utf-8", _BUSY.encode()
        if kind in ("page", "slow") and n.isdigit() and int(n) < self._total(kind):
            delay = self.delay if kind == "page" else self.slow_delay
            images = "".join(f'<img src="/img/{n}-{i}.png" alt="">' for i in range(self.images))
            body = _SHELL.format(
                tracker=TRACKER_HOST,
                port=self.port,
                images=images,
                api=f"/api/{kind}/{n}",
                delay=delay,
            )
            return 200, "text/html; charset=utf-8", body.encode()
        if kind == "plain" and n.isdigit() and int(n) < self.plain_pages:
            links = "".join(
                f'<a href="{u}">{u}</a>' for u in self._children("plain", int(n), self.plain_pages)
            )
            return 200, "text/html; charset=utf-8", _PLAIN.format(n=n, links=links).encode()
        return 404, "text/plain", b"not found"

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        site = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                path = self.path.split("?", 1)[0]
                host = (self.headers.get("Host") or "").rsplit(":", 1)[0]
                with site._lock:
                    site._hits[(host, path)] += 1
                    site._log.append((time.monotonic(), host, path))
                if path == "/never.js":
                    site._release.wait()
                    return
                if path.startswith("/api/") and site.api_latency:
                    site._release.wait(site.api_latency)
                elif path.startswith(("/img/", "/font/", "/t.js")) and site.asset_latency:
                    site._release.wait(site.asset_latency)
                status, ctype, body = site._route(path)
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", ctype)
                    self.send_header("Content-Length", str(len(body)))
                    self.send_header("Cache-Control", "no-store")
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True  # the browser closed the page

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002
                pass

        return Handler
