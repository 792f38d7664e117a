"""A site whose pages have versions and validators, for the recrawl tests.

Pages ``/`` (page 0) and ``/p/<n>`` link as a binary tree (page n to 2n+1 and
2n+2), so one seed reaches them all. Every page sends an ``ETag`` and a
``Last-Modified`` of its version. A page ``honours`` conditional requests (a
matching ``If-None-Match`` or a not-older ``If-Modified-Since`` gets a 304)
or ignores them (a full 200, the same bytes while its version stays).
``change(pages)`` bumps versions. Every request is logged with its
conditional headers, so a test sees what a crawl really sent.

With ``extras``, page 0 also links to pages that end otherwise (``EXTRAS``): a
301 to page 1, a 404, a 503 every time, a 403 (a block, BAN_HTTP_CODES) and a
connection closed without an answer.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime, parsedate_to_datetime
from http.server import BaseHTTPRequestHandler

from tests.support.threaded_site import ThreadedSite


@dataclass(frozen=True)
class Hit:
    path: str
    status: int
    if_none_match: str | None
    if_modified_since: str | None


# Path -> the status it answers (0: the connection is closed, no answer).
EXTRAS = {"/moved": 301, "/gone": 404, "/down": 503, "/banned": 403, "/drop": 0}


class VersionedSite(ThreadedSite):
    """``with VersionedSite(50, honours=...) as site:`` serves on a free port of 127.0.0.1."""

    def __init__(self, pages: int, honours: set[int], extras: bool = False) -> None:
        self.pages = pages
        self.honours = honours
        self.extras = extras
        self.versions = [1] * pages
        self.hits: list[Hit] = []
        self._lock = threading.Lock()
        super().__init__()

    @staticmethod
    def path(n: int) -> str:
        return "/" if n == 0 else f"/p/{n}"

    def page_url(self, n: int) -> str:
        return self.url.rstrip("/") + self.path(n)

    def change(self, pages: set[int]) -> None:
        with self._lock:
            for n in pages:
                self.versions[n] += 1

    def log(self) -> list[Hit]:
        with self._lock:
            return list(self.hits)

    def _modified(self, version: int) -> datetime:
        return datetime(2026, 1, 1, tzinfo=UTC) + timedelta(days=version)

    def _answer(self, handler: BaseHTTPRequestHandler) -> None:
        path = handler.path
        inm = handler.headers.get("If-None-Match")
        ims = handler.headers.get("If-Modified-Since")
        number = {self.path(n): n for n in range(self.pages)}.get(path)
        with self._lock:
            version = self.versions[number] if number is not None else 0
        if path in EXTRAS and self.extras:
            status = EXTRAS[path]
            with self._lock:
                self.hits.append(Hit(path, status, inm, ims))
            if status == 0:
                return  # closed without an answer
            handler.send_response(status)
            if status == 301:
                handler.send_header("Location", self.path(1))
            handler.send_header("Content-Length", "0")
            handler.end_headers()
            return
        if number is None:
            status, headers, body = 404, {"Content-Type": "text/plain"}, b"no such page"
        else:
            etag = f'"{number}-{version}"'
            modified = self._modified(version)
            headers = {
                "Content-Type": "text/html; charset=utf-8",
                "ETag": etag,
                "Last-Modified": format_datetime(modified, usegmt=True),
            }
            fresh = inm == etag or (
                inm is None and ims is not None and parsedate_to_datetime(ims) >= modified
            )
            if number in self.honours and fresh:
                status, body = 304, b""
            else:
                links = "".join(
                    f'<a href="{self.path(c)}">{c}</a> '
                    for c in (2 * number + 1, 2 * number + 2)
                    if c < self.pages
                )
                if number == 0 and self.extras:
                    links += "".join(f'<a href="{extra}">{extra}</a> ' for extra in EXTRAS)
                status = 200
                body = (
                    f"<html><head><title>Page {number} v{version}</title></head>"
                    f"<body><p>Version {version}</p>{links}</body></html>"
                ).encode()
        with self._lock:
            self.hits.append(Hit(path, status, inm, ims))
        handler.send_response(status)
        for name, value in headers.items():
            handler.send_header(name, value)
        if status != 304:
            handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        if status != 304:
            handler.wfile.write(body)
