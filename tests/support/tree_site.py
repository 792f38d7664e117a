"""A site of endless trees on one host: each job of a test crawls its own tree.

``/<tree>/<n>`` (``tree`` a lower-case name, ``n`` from 0) links to
``/<tree>/<k n + 1>`` ... ``/<tree>/<k n + k>``, so a crawl seeded at
``/<tree>/0`` never runs out within a test and never leaves its tree: two jobs
seeded at two trees share the host (one politeness group, one cap) and never
one URL (no seen-set overlap). Every request is logged as ``TestSite`` logs
them, so a test counts what each job fetched, and when.
"""

from __future__ import annotations

import re

from tests.support.site import TestSite

_PAGE = re.compile(r"/([a-z]+)/(\d+)")


class TreeSite(TestSite):
    """``TestSite`` answering ``/<tree>/<n>`` with ``links`` children, after ``latency``."""

    __test__ = False

    def __init__(self, links: int = 4, latency: float = 0.0) -> None:
        super().__init__(pages=1, latency=latency, dead_links=False, offsite_links=False)
        self.links = links

    def tree(self, name: str) -> str:
        """The URL of the root of tree ``name``."""
        return f"{self.url}{name}/0"

    def fetched(self, tree: str, start: float = 0.0, end: float = float("inf")) -> int:
        """Pages of ``tree`` the site answered between ``start`` and ``end`` (monotonic)."""
        prefix = f"/{tree}/"
        log = self.request_log()
        return sum(1 for t, _, target, _ in log if start <= t < end and target.startswith(prefix))

    def _route(
        self, site: int, method: str, target: str, host: str | None
    ) -> tuple[int, str, bytes]:
        found = _PAGE.fullmatch(target)
        if found is None:
            return super()._route(site, method, target, host)
        tree, n = found.group(1), int(found.group(2))
        first = self.links * n + 1
        hrefs = "".join(
            f'<a href="/{tree}/{child}">{tree} {child}</a>\n'
            for child in range(first, first + self.links)
        )
        body = f"<html><head><title>{tree} {n}</title></head><body>\n{hrefs}</body></html>"
        return 200, "text/html; charset=utf-8", body.encode()
