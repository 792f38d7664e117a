"""The benchmark's site, in a process of its own: ``python -m tests.bench.site_proc --pages N``.

The tests' :class:`~tests.support.site.TestSite` in the same process as the crawler
would take its GIL; in a process of its own it can be pinned to another core and
its CPU measured apart. Every page is rendered before the first request, so the
first crawl measured does not pay for filling the site's cache.

It prints ``ready <port> ...`` (one port per host, ``--hosts``) once it serves,
then answers one line per command read
from stdin:

- ``count``: requests served since the last ``reset``;
- ``times``: JSON list of the arrival times (``time.monotonic()``, the same clock in
  every process of the machine) of the successful page GETs since the last ``reset``;
- ``hosts``: JSON object, successful page GETs per host (``127.0.0.1:<port>``) since
  the last ``reset``;
- ``reset``: forget the request log (the crawls of one benchmark share the site);
  answers ``ok``;
- ``session on`` / ``session off``: from now on the root page sets a session
  cookie (``Set-Cookie: session=...; Path=/``), or not (the default); answers
  ``ok`` (issue 41 item 9's crawl with a session cookie, ``cookie_cost.py``);
- ``missing``: page GETs other than the root's since the last ``reset`` that
  came without that cookie (counted while the session is on).

It exits at end of input. :class:`Site` is the benchmark's handle on it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import json
import subprocess
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from tests.support.processes import PYTHON, Proc
from tests.support.site import TestSite

SESSION = "session=bench-3f9c2a7d41"
# The Cookie header of the request a connection's task is answering (each
# connection has a task of its own, and serves its requests one at a time).
_cookie: contextvars.ContextVar[str] = contextvars.ContextVar("cookie", default="")


class _HeadReader:
    """A connection's reader that notes each request's Cookie header as its head is read."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader

    async def readuntil(self, separator: bytes) -> bytes:
        head = await self._reader.readuntil(separator)
        cookie = ""
        for line in head.decode("latin-1").split("\r\n")[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "cookie":
                cookie = value.strip()
        _cookie.set(cookie)
        return head

    async def readexactly(self, n: int) -> bytes:
        return await self._reader.readexactly(n)


class BenchSite(TestSite):
    """The tests' site, whose request log can be read cheaply and emptied between crawls,
    and whose root can set a session cookie that every other page checks."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.session = False
        self._missing = 0

    async def _connection(
        self, site: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        await super()._connection(site, _HeadReader(reader), writer)  # type: ignore[arg-type]

    def served(
        self, arrived: float, host: str, site: int, method: str, target: str, status: int
    ) -> None:
        super().served(arrived, host, site, method, target, status)
        if self.session and status == 200 and target not in ("/", "/robots.txt"):
            if SESSION not in _cookie.get().split("; "):
                self._missing += 1

    def extra_headers(self, target: str, status: int) -> list[tuple[str, str]]:
        if self.session and target == "/" and status == 200:
            return [("Set-Cookie", f"{SESSION}; Path=/")]
        return []

    def missing(self) -> int:
        with self._lock:
            return self._missing

    def prerender(self) -> None:
        """Fill the page cache on the server's own loop (the only code that touches it)."""
        assert self._loop is not None

        async def fill() -> None:
            for site in range(len(self._sites)):
                for n in range(self.pages):
                    self._cache[(site, n)] = self._render(site, n)

        asyncio.run_coroutine_threadsafe(fill(), self._loop).result()

    def count(self) -> int:
        with self._lock:
            return len(self._log)

    def page_times(self) -> list[float]:
        with self._lock:
            return [t for t, _, _, status in self._log if status == 200]

    def pages_by_host(self) -> dict[str, int]:
        with self._lock:
            return dict(Counter(host for _, host, _, status in self._log if status == 200))

    def reset(self) -> None:
        with self._lock:
            self._log.clear()
            self._hits.clear()
            self._missing = 0


class Site:
    """``tests.bench.site_proc`` as a child process, asked over its stdin."""

    def __init__(
        self, pages: int, log_dir: Path, cpus: Iterable[int] | None, hosts: int = 1
    ) -> None:
        argv = [PYTHON, "-m", "tests.bench.site_proc", "--pages", str(pages)]
        argv += ["--hosts", str(hosts)]
        self.pages = pages * hosts
        self.proc = Proc(
            "site",
            argv,
            {},
            log_dir / "site.log",
            cpus=cpus,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        line = self._read()
        if not line.startswith("ready "):
            raise RuntimeError(f"site did not start: {line!r} {self.proc.log()}")
        # Each host is a site of ``pages`` pages of its own, on a port of its own.
        self.urls = [f"http://127.0.0.1:{port}/" for port in line.split()[1:]]
        self.url = self.urls[0]

    def _read(self) -> str:
        assert self.proc.popen.stdout is not None
        return self.proc.popen.stdout.readline().decode().strip()

    def ask(self, command: str) -> str:
        assert self.proc.popen.stdin is not None
        self.proc.popen.stdin.write(f"{command}\n".encode())
        self.proc.popen.stdin.flush()
        return self._read()

    def count(self) -> int:
        return int(self.ask("count"))

    def page_times(self) -> list[float]:
        return json.loads(self.ask("times"))

    def pages_by_host(self) -> dict[str, int]:
        return json.loads(self.ask("hosts"))

    def reset(self) -> None:
        self.ask("reset")

    def set_session(self, on: bool) -> None:
        """Whether the root sets the session cookie from now on (off at start)."""
        self.ask(f"session {'on' if on else 'off'}")

    def missing(self) -> int:
        """Pages but the root fetched without the session cookie since the last reset."""
        return int(self.ask("missing"))

    def stop(self) -> None:
        if self.proc.popen.stdin is not None:
            self.proc.popen.stdin.close()
        self.proc.stop(10)
        self.proc.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--pages", type=int, required=True)
    parser.add_argument("--hosts", type=int, default=1, help="sites, one per port")
    parser.add_argument("--seed", type=int, default=6)
    args = parser.parse_args(argv)
    # Pages link to their own host only through real pages: no 404s, no 503s, so
    # every response is a page and an item. Off-site links stay, the spider drops them.
    with BenchSite(args.pages, seed=args.seed, dead_links=False, hosts=args.hosts) as site:
        site.prerender()
        ports = " ".join(url.rsplit(":", 1)[1].rstrip("/") for url in site.urls)
        print(f"ready {ports}", flush=True)
        for line in sys.stdin:
            command = line.strip()
            if command == "count":
                answer = str(site.count())
            elif command == "times":
                answer = json.dumps(site.page_times())
            elif command == "hosts":
                answer = json.dumps(site.pages_by_host())
            elif command == "reset":
                site.reset()
                answer = "ok"
            elif command in ("session on", "session off"):
                site.session = command == "session on"
                answer = "ok"
            elif command == "missing":
                answer = str(site.missing())
            else:
                answer = f"error unknown command {command!r}"
            print(answer, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
