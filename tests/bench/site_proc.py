"""The benchmark's site, in a process of its own: ``python -m tests.bench.site_proc --pages N``.

The tests' :class:`~tests.support.site.TestSite` in the same process as the crawler
would take its GIL; in a process of its own it can be pinned to another core and
its CPU measured apart. Every page is rendered before the first request, so the
first crawl measured does not pay for filling the site's cache.

It prints ``ready <port>`` once it serves, then answers one line per command read
from stdin:

- ``count``: requests served since the last ``reset``;
- ``times``: JSON list of the arrival times (``time.monotonic()``, the same clock in
  every process of the machine) of the successful page GETs since the last ``reset``;
- ``reset``: forget the request log (the crawls of one benchmark share the site);
  answers ``ok``.

It exits at end of input.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence

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

    def reset(self) -> None:
        with self._lock:
            self._log.clear()
            self._hits.clear()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--pages", type=int, required=True)
    parser.add_argument("--seed", type=int, default=6)
    args = parser.parse_args(argv)
    # Pages link to their own host only through real pages: no 404s, no 503s, so
    # every response is a page and an item. Off-site links stay, the spider drops them.
    with BenchSite(args.pages, seed=args.seed, dead_links=False) as site:
        site.prerender()
        print(f"ready {site.port}", flush=True)
        for line in sys.stdin:
            command = line.strip()
            if command == "count":
                answer = str(site.count())
            elif command == "times":
                answer = json.dumps(site.page_times())
            elif command == "reset":
                site.reset()
                answer = "ok"
            else:
                answer = f"error unknown command {command!r}"
            print(answer, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
