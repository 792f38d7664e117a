"""Page reuse: an open page is navigated to the next URL instead of being closed.

Opening a page costs Chromium a new renderer process more often than not
(site isolation gives each new tab its own), and Playwright a page object,
its frames and event wiring; closing it tears all that down again. A page
navigated from one URL of a site to the next keeps its renderer process, so
the browser does the work of one navigation instead of a process start and
exit per URL (docs/BENCHMARKS.md, "Rendering", measures both).

A page serves at most ``RENDER_URLS_PER_PAGE`` URLs, then it is closed, which
bounds what a long-lived page can accumulate; its context's own limit
(``RENDER_PAGES_PER_CONTEXT``, counted in URLs) and the browser restarts of
:mod:`.recycle` still apply: a context's idle pages go with it. An idle page
keeps its last document, whose scripts go on running (and fetching, outside
the host's turns): a page idle for ``RENDER_IDLE_PAGE_CLOSE`` seconds is
closed, so a worker with nothing to render has no page open for long.

Bookkeeping only (no Playwright here): :mod:`.page_reuse` decides when a page is
healthy enough to go back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

P = TypeVar("P")


@dataclass
class _Idle(Generic[P]):
    page: P
    served: int  # URLs this page has rendered so far
    since: float  # when it went idle (the caller's clock)


class PagePool(Generic[P]):
    """Idle pages per context; each page serves at most ``urls_per_page`` URLs."""

    def __init__(self, urls_per_page: int) -> None:
        self.urls_per_page = urls_per_page
        self._idle: dict[str, list[_Idle[P]]] = {}
        self._served: dict[int, int] = {}  # id(page) -> URLs served, while it is out

    @property
    def enabled(self) -> bool:
        return self.urls_per_page > 1

    @property
    def idle(self) -> int:
        return sum(len(pages) for pages in self._idle.values())

    def take(self, context: str) -> P | None:
        """An idle page of ``context`` (the most recently used), or None: open a new one."""
        pages = self._idle.get(context)
        if not pages:
            return None
        entry = pages.pop()
        self._served[id(entry.page)] = entry.served
        return entry.page

    def give_back(self, context: str, page: P, now: float = 0.0) -> bool:
        """``page`` rendered one more URL of ``context``; True if it stays for the
        next one, False if it has served its share (the caller closes it)."""
        served = self._served.pop(id(page), 0) + 1
        if not self.enabled or served >= self.urls_per_page:
            return False
        self._idle.setdefault(context, []).append(_Idle(page, served, now))
        return True

    def expire(self, page: P, now: float, idle_for: float) -> bool:
        """True (and ``page`` is forgotten: the caller closes it) if it has been
        idle for ``idle_for`` seconds by ``now``; False if it is out again, gone,
        or went idle later."""
        for context, pages in self._idle.items():
            for entry in pages:
                if entry.page is page:
                    if now - entry.since < idle_for:
                        return False
                    pages.remove(entry)
                    if not pages:
                        del self._idle[context]
                    return True
        return False

    def forget(self, page: P) -> None:
        """``page`` is not coming back (it failed, crashed or was cancelled; the caller
        closes it), whether it is out or idle."""
        self._served.pop(id(page), None)
        for context, pages in list(self._idle.items()):
            pages[:] = [entry for entry in pages if entry.page is not page]
            if not pages:
                del self._idle[context]

    def drop(self, context: str) -> list[P]:
        """The idle pages of ``context``, which is being closed; no longer handed out."""
        return [entry.page for entry in self._idle.pop(context, [])]

    def clear(self) -> list[P]:
        """Every idle page: the browser is restarting or gone."""
        pages = [entry.page for entries in self._idle.values() for entry in entries]
        self._idle.clear()
        self._served.clear()
        return pages
