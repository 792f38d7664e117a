"""Bounded memory on long crawls: which browser context a new page goes to, and when
the context or the whole browser is retired.

Chromium's memory grows with what a context and a browser have seen
(caches, renderer processes kept for reuse, leaks in long-lived pages), which
is the growth scrapy-playwright users report on long crawls. Pages are
therefore handed out in generations: a context takes ``pages_per_context``
pages, then new pages go to a fresh context and the old one is closed once
its last page is done; after ``pages_per_browser`` pages the browser itself
is restarted once the pages in flight are done, as it is when
``request_restart`` asks for it (too big or too slow: :mod:`.health`).
"""

from __future__ import annotations

import asyncio
from collections import Counter


class Recycler:
    """Bookkeeping only (no Playwright here): names, counts, and what is due."""

    def __init__(self, pages_per_context: int, pages_per_browser: int, prefix: str = "render"):
        self.pages_per_context = pages_per_context
        self.pages_per_browser = pages_per_browser
        self.prefix = prefix
        self._generation = 0
        self._in_context = 0  # pages handed to the current context
        self._in_browser = 0  # pages handed to the current browser
        self._in_flight: Counter[str] = Counter()
        self._retired: set[str] = set()
        self.drained = asyncio.Event()  # set while no page is in flight
        self.drained.set()
        # Why the browser must restart before its page count says so, or None.
        self.restart_reason: str | None = None
        self.restart_kind = "pages"

    @property
    def current(self) -> str:
        return f"{self.prefix}-{self._generation}"

    @property
    def in_flight(self) -> int:
        return sum(self._in_flight.values())

    def browser_due(self) -> bool:
        """True once the browser has had its share of pages, or was asked to restart."""
        return self.restart_reason is not None or self._in_browser >= self.pages_per_browser

    def request_restart(self, kind: str, reason: str) -> bool:
        """Restart the browser once its pages in flight are done; False if already due."""
        if self.restart_reason is not None:
            return False
        self.restart_kind, self.restart_reason = kind, reason
        return True

    @property
    def due_because(self) -> tuple[str, str]:
        """(kind, reason) of the restart that is due: "pages", "memory" or "slowdown"."""
        if self.restart_reason is not None:
            return self.restart_kind, self.restart_reason
        return "pages", f"after {self._in_browser} pages (RENDER_PAGES_PER_BROWSER)"

    def acquire(self) -> str:
        """The context name for one new page; count it."""
        name = self.current
        self._in_flight[name] += 1
        self._in_context += 1
        self._in_browser += 1
        self.drained.clear()
        if self._in_context >= self.pages_per_context:
            self._retire_current()
        return name

    def release(self, name: str) -> bool:
        """One page of ``name`` is done; True if the context is retired and now unused."""
        self._in_flight[name] -= 1
        if self._in_flight[name] <= 0:
            del self._in_flight[name]
        if not self._in_flight:
            self.drained.set()
        if name in self._retired and name not in self._in_flight:
            self._retired.discard(name)
            return True
        return False

    def browser_restarted(self) -> None:
        """A new browser comes next (restart or crash): contexts start over."""
        self._in_browser = 0
        self.restart_reason = None
        if self._in_context:
            self._retire_current()
        # Contexts of the old browser are gone with it; nothing left to close.
        self._retired.clear()

    def _retire_current(self) -> None:
        self._retired.add(self.current)
        self._generation += 1
        self._in_context = 0
