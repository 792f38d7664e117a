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
  answers ``ok``.

It exits at end of input. :class:`Site` is the benchmark's handle on it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

from tests.support.processes import PYTHON, Proc
from tests.support.site import TestSite


class BenchSite(TestSite):
    """The tests' site, whose request log can be read cheaply and emptied between crawls."""

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
            else:
                answer = f"error unknown command {command!r}"
            print(answer, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
