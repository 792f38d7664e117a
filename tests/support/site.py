"""The local sites tests crawl: the demo's generated site with a request log, and JS pages.

``TestSite`` is the demo's ``SiteServer`` (a known page set with duplicate,
fragment, relative, dead, off-site and flaky links) that also keeps every
request it answered, so tests can assert what a crawl really sent: which
hosts, in which order, how far apart. The JS pages a browser must render live
in ``tests/support/js_site.py``.
"""

from __future__ import annotations

from typing import Any

from spiders_project.demo.site import OFFSITE_HOST, SiteServer

__all__ = ["OFFSITE_HOST", "TestSite"]


class TestSite(SiteServer):
    """``SiteServer`` plus ``request_log()`` and ``offsite_requests()``."""

    __test__ = False  # a helper, not a test class, whatever pytest thinks of its name

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._log: list[tuple[float, str, str, int]] = []

    def served(
        self, arrived: float, host: str, site: int, method: str, target: str, status: int
    ) -> None:
        super().served(arrived, host, site, method, target, status)
        self._log.append((arrived, host, target, status))

    def request_log(self) -> list[tuple[float, str, str, int]]:
        """(monotonic arrival time, Host header, path with query, status) of every request."""
        with self._lock:
            return list(self._log)

    def offsite_requests(self) -> list[tuple[float, str, str, int]]:
        """Requests whose Host header names none of the served sites (a crawler bug)."""
        own = {self._netloc(p) for p in self._started_ports()}
        return [entry for entry in self.request_log() if entry[1] not in own]
