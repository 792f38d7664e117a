"""A deterministic local website for ``make demo`` (tests and benchmarks extend it).

It serves the pages of ``pages.py`` (a known page set with every link trap)
plus flaky pages (503 once) and optional latency. Benchmarks need it fast
enough that they measure the crawler, not the site, so this is a lean asyncio
HTTP/1.1 server with keep-alive, stdlib only, running on its own event loop in
a background thread.

Run ``python -m spiders_project.demo.site --pages 300 --port 8000`` to serve one
until SIGTERM or SIGINT.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import functools
import html
import signal
import threading
import time
from collections.abc import Sequence
from http import HTTPStatus
from types import TracebackType

from spiders_project.demo.pages import OFFSITE_HOST, build_site

__all__ = ["OFFSITE_HOST", "SiteServer", "main"]

_MAX_HEAD = 64 * 1024
_ROBOTS = b"User-agent: *\nAllow: /\n"


def _response(
    status: int, ctype: str, body: bytes, keep_alive: bool, head: bool, extra: str = ""
) -> bytes:
    phrase = HTTPStatus(status).phrase
    conn = "keep-alive" if keep_alive else "close"
    return (
        f"HTTP/1.1 {status} {phrase}\r\nContent-Type: {ctype}\r\n{extra}"
        f"Content-Length: {len(body)}\r\nCache-Control: no-store\r\nConnection: {conn}\r\n\r\n"
    ).encode("latin-1") + (b"" if head else body)


@functools.cache
def _error_body(status: int) -> bytes:
    phrase = f"{status} {HTTPStatus(status).phrase}"
    return (
        f"<html><head><title>{phrase}</title></head><body><h1>{phrase}</h1></body></html>".encode()
    )


_HTML = "text/html; charset=utf-8"


class SiteServer:
    """Serves ``hosts`` generated sites, one per port, and records every request.

    Page ``n`` of a site is ``/`` for 0 and ``/page/<n>`` otherwise. The graph
    and text depend only on ``seed`` and the arguments, never on the port. With
    ``offsite_links`` the pages also link to ``OFFSITE_HOST`` and to a "trap"
    port on ``host`` that answers 404 to everything, so an off-site request a
    crawler should not have made shows up (the tests' ``TestSite`` logs
    every request). With ``port`` set and ``hosts > 1``, site ``i``
    listens on ``port + i``.
    """

    def __init__(
        self,
        pages: int = 300,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        seed: int = 0,
        links_per_page: int = 8,
        latency: float = 0.0,
        flaky_every: int = 0,
        dead_links: bool = True,
        offsite_links: bool = True,
        fragment_links: bool = True,
        hosts: int = 1,
    ) -> None:
        if pages < 1 or hosts < 1 or links_per_page < 0 or latency < 0 or flaky_every < 0:
            raise ValueError("pages and hosts must be >= 1; the other numbers >= 0")
        self.pages = pages
        self.host = host
        self.latency = latency
        self.flaky_every = flaky_every
        self._want_port = port
        self._offsite = offsite_links
        self._sites = [
            build_site(
                pages, f"{seed}:{i}", links_per_page, dead_links, offsite_links, fragment_links
            )
            for i in range(hosts)
        ]
        self._ports: list[int] = []
        self._trap_port = 0
        self._lock = threading.Lock()
        self._hits: collections.Counter[str] = collections.Counter()
        self._statuses: collections.Counter[int] = collections.Counter()
        # Touched only on the server's event loop, so they need no lock.
        self._cache: dict[tuple[int, int], bytes] = {}
        self._flaky_seen: set[tuple[int, int]] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None

    # -- lifecycle -------------------------------------------------------------------

    def start(self) -> SiteServer:
        """Bind every port and serve from a daemon thread; returns once requests are accepted."""
        if self._thread is not None:
            raise RuntimeError("SiteServer can be started only once")
        self._thread = threading.Thread(target=self._run, name="site-server", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            self._thread.join()
            raise self._error
        return self

    def stop(self) -> None:
        """Close the listeners and every open connection, then join the thread."""
        thread, loop, stopping = self._thread, self._loop, self._stopping
        if thread is None or loop is None or stopping is None or not thread.is_alive():
            return
        loop.call_soon_threadsafe(stopping.set)
        thread.join()

    def __enter__(self) -> SiteServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- where it serves, what it served ----------------------------------------------

    @property
    def port(self) -> int:
        return self._started_ports()[0]

    @property
    def url(self) -> str:
        """Root page of site 0."""
        return self.urls[0]

    @property
    def urls(self) -> list[str]:
        """Root page of every site, in site order."""
        return [f"http://{self._netloc(p)}/" for p in self._started_ports()]

    def page_urls(self) -> set[str]:
        """Every real page of every site: exactly what a correct crawl stores."""
        return {
            root if n == 0 else f"{root}page/{n}" for root in self.urls for n in range(self.pages)
        }

    def hits(self) -> collections.Counter[str]:
        """Successful GETs per absolute URL (robots.txt and trap port included)."""
        with self._lock:
            return collections.Counter(self._hits)

    def statuses(self) -> collections.Counter[int]:
        """Requests answered, by status (503: a flaky page's first answer)."""
        with self._lock:
            return collections.Counter(self._statuses)

    def served(
        self, arrived: float, host: str, site: int, method: str, target: str, status: int
    ) -> None:
        """Record one answered request (called on the server's thread, under ``_lock``).

        ``arrived`` is its ``time.monotonic()``, ``host`` its Host header and
        ``site`` the index of the site (-1: the off-site trap). Counts the
        answers for ``statuses()`` and the successful GETs for ``hits()``; a
        subclass that needs more (the tests' request log) extends it.
        """
        self._statuses[status] += 1
        if status == 200 and method == "GET":
            self._hits[self._absolute(site, target)] += 1

    def _netloc(self, port: int) -> str:
        return f"[{self.host}]:{port}" if ":" in self.host else f"{self.host}:{port}"

    def _started_ports(self) -> list[int]:
        if not self._ports:
            raise RuntimeError("SiteServer is not started")
        return self._ports

    # -- the event loop thread -------------------------------------------------------

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # surfaced to start() instead of dying silently
            self._error = self._error or exc
        finally:
            self._ready.set()

    async def _main(self) -> None:
        servers: list[asyncio.Server] = []
        try:
            for i in range(len(self._sites)):
                port = self._want_port + i if self._want_port else 0
                servers.append(await self._listen(i, port))
                self._ports.append(servers[-1].sockets[0].getsockname()[1])
            if self._offsite:
                servers.append(await self._listen(-1, 0))
                self._trap_port = servers[-1].sockets[0].getsockname()[1]
        except BaseException as exc:
            for server in servers:
                server.close()
            self._error, self._ports = exc, []
            return
        self._loop, self._stopping = asyncio.get_running_loop(), asyncio.Event()
        self._ready.set()
        await self._stopping.wait()
        for server in servers:
            server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _listen(self, site: int, port: int) -> asyncio.Server:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await self._connection(site, reader, writer)

        return await asyncio.start_server(
            handle, self.host, port, backlog=1024, limit=_MAX_HEAD, reuse_address=True
        )

    async def _connection(
        self, site: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        """Serve requests one after another on a keep-alive connection."""
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            keep_alive = True
            while keep_alive:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
                    return
                arrived = time.monotonic()
                lines = head.decode("latin-1").split("\r\n")
                parts = lines[0].split(" ")
                headers: dict[str, str] = {}
                for line in lines[1:]:
                    name, _, value = line.partition(":")
                    headers[name.strip().lower()] = value.strip()
                length = headers.get("content-length", "0")
                if len(parts) != 3 or "transfer-encoding" in headers or not length.isdigit():
                    writer.write(_response(400, _HTML, _error_body(400), False, False))
                    return
                method, target, version = parts
                if int(length):
                    await reader.readexactly(int(length))
                conn = headers.get("connection", "").lower()
                keep_alive = "close" not in conn and (version != "HTTP/1.0" or "keep-alive" in conn)
                host = headers.get("host")
                status, ctype, body = await self.respond(site, method, target, host, arrived)
                extra = "".join(f"{k}: {v}\r\n" for k, v in self.extra_headers(target, status))
                writer.write(_response(status, ctype, body, keep_alive, method == "HEAD", extra))
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            pass  # stop() cancels open connections; asyncio 3.11 would log a cancelled handler
        finally:
            self._tasks.discard(task)
            writer.close()

    async def respond(
        self, site: int, method: str, target: str, host: str | None, arrived: float
    ) -> tuple[int, str, bytes]:
        """Status, content type and body of one request, once the site's latency has passed.

        Recorded with ``served`` first. The tests' JS site serves its own pages
        through the same server by overriding this.
        """
        status, ctype, body = self._route(site, method, target, host)
        with self._lock:
            self.served(arrived, host or "", site, method, target, status)
        if self.latency:
            await asyncio.sleep(self.latency)
        return status, ctype, body

    def extra_headers(self, target: str, status: int) -> list[tuple[str, str]]:
        """Headers to send besides the fixed ones (a test site's redirects); none here."""
        return []

    def _absolute(self, site: int, target: str) -> str:
        port = self._trap_port if site < 0 else self._ports[site]
        return f"http://{self._netloc(port)}{target}"

    def _route(
        self, site: int, method: str, target: str, host: str | None
    ) -> tuple[int, str, bytes]:
        """Status, content type and body for one request; flips flaky pages on first sight."""
        if site < 0:
            return 404, _HTML, _error_body(404)  # the off-site trap serves nothing
        if host is not None and host != self._netloc(self._ports[site]):
            return 421, _HTML, _error_body(421)
        if method not in ("GET", "HEAD"):
            return 405, _HTML, _error_body(405)
        if target == "/robots.txt":
            return 200, "text/plain; charset=utf-8", _ROBOTS
        n = self._page_number(target)
        if n is None:
            return 404, _HTML, _error_body(404)
        if self.flaky_every and n and n % self.flaky_every == 0:
            if (site, n) not in self._flaky_seen:
                self._flaky_seen.add((site, n))
                return 503, _HTML, _error_body(503)
        body = self._cache.get((site, n))
        if body is None:
            body = self._cache[(site, n)] = self._render(site, n)
        return 200, _HTML, body

    def _page_number(self, target: str) -> int | None:
        """Page number of a canonical page path; anything else (queries too) is not a page."""
        if target == "/":
            return 0
        prefix, _, number = target.partition("/page/")
        if prefix or not number.isdigit() or number != str(int(number)):
            return None
        n = int(number)
        return n if 0 < n < self.pages else None

    def _render(self, site: int, n: int) -> bytes:
        page = self._sites[site][n]
        fill = {
            "netloc": self._netloc(self._ports[site]),
            "trap": self._netloc(self._trap_port),
        }
        links = "\n".join(
            f'<li><a href="{html.escape(href.format(**fill))}">{html.escape(label)}</a></li>'
            for href, label in page.hrefs
        )
        return (
            f"<!DOCTYPE html>\n<html><head><title>Page {n}</title></head>\n"
            f"<body><h1>Site {site}, page {n}</h1>\n<p>{page.text}</p>\n"
            f"<ul>\n{links}\n</ul>\n</body></html>\n"
        ).encode()


def main(argv: Sequence[str] | None = None) -> int:
    """Serve a site until SIGTERM or SIGINT; both are a clean exit (status 0)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--pages", type=int, default=300)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--links-per-page", type=int, default=8)
    parser.add_argument("--latency", type=float, default=0.0, help="seconds per response")
    parser.add_argument("--flaky-every", type=int, default=0, help="page n%%k==0 answers 503 once")
    parser.add_argument("--hosts", type=int, default=1, help="sites, one port each")
    parser.add_argument("--no-dead-links", dest="dead_links", action="store_false")
    parser.add_argument("--no-offsite-links", dest="offsite_links", action="store_false")
    parser.add_argument("--no-fragment-links", dest="fragment_links", action="store_false")
    args = parser.parse_args(argv)
    done = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: done.set())
    with SiteServer(
        args.pages,
        host=args.host,
        port=args.port,
        seed=args.seed,
        links_per_page=args.links_per_page,
        latency=args.latency,
        flaky_every=args.flaky_every,
        dead_links=args.dead_links,
        offsite_links=args.offsite_links,
        fragment_links=args.fragment_links,
        hosts=args.hosts,
    ) as server:
        print(f"serving {len(server.page_urls())} pages at {' '.join(server.urls)}", flush=True)
        while not done.wait(1.0):
            pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
