"""When a browser that still works should be restarted anyway: too big, or too slow.

Page counts (``RENDER_PAGES_PER_BROWSER``) bound a browser's age, not its
size: one page that leaks, or a site whose pages are heavy, can grow Chromium
past what the machine holds long before that count, and the kernel's OOM
killer then picks a victim (the worker itself, or a neighbour). A browser that
degrades (renderer processes kept alive, caches, a wedged GPU or network
process) renders slower and slower instead. Both are cured by a restart,
which is cheap next to either (docs/BENCHMARKS.md, "Figures moved out of
code comments").

``BrowserHealth`` only decides; the handler restarts the browser once the
pages in flight are done (``Recycler.request_restart``), logs it and counts it.

- **Memory**: the resident memory (RSS) of every process under Playwright's
  driver, summed (Chromium's browser, GPU, network and renderer processes),
  read from /proc every ``MEMORY_EVERY`` seconds while a browser runs. Summed
  RSS counts pages shared between the processes more than once, so it is an
  upper bound of what the tree really uses (docs/BENCHMARKS.md, "Rendering",
  gives both the summed RSS and the PSS).
- **Speed**: the seconds each page takes to render, as two running averages:
  the worker's norm (the mean of its pages, the last ``NORM_PAGES`` weighing
  most, kept across browsers) and the recent pace of this browser (its last
  few pages). When the recent pace is ``slowdown`` times the norm (pages/s
  fallen to a quarter at 4), after ``MIN_PAGES`` pages of this browser, the
  browser is restarted. Time spent waiting for a host's turn is not render
  time. If the next browser is as slow after its own ``MIN_PAGES``, the site
  is slow, not the browser: its pace becomes the norm, and no restart follows.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import psutil  # type: ignore[import-untyped]  # no stubs pinned

# Seconds between two readings of the browser's memory.
MEMORY_EVERY = 1.0
# Pages a browser renders before its speed is judged (and between two restarts for speed).
MIN_PAGES = 20
# The norm is the mean of the worker's pages, the latest weighing 1/NORM_PAGES
# once there are that many; the recent pace weighs the latest page FAST_WEIGHT.
NORM_PAGES = 500
FAST_WEIGHT = 0.2


@dataclass
class BrowserHealth:
    max_rss_mb: int  # RENDER_MAX_RSS_MB; 0: no memory bound
    slowdown: float  # RENDER_SLOWDOWN_FACTOR; 0: no speed check
    norm: float = 0.0  # the worker's mean render time (s) per page, across browsers
    recent: float = 0.0  # this browser's recent pace (s per page)
    pages: int = 0  # pages rendered by this browser
    total: int = 0  # pages rendered by this worker
    browsers: int = 0  # browsers restarted so far (generation of the current one)
    blamed: int = -2  # the last browser found slow

    def rendered(self, seconds: float) -> str | None:
        """Count one page rendered in ``seconds``; why the browser must restart, or None."""
        self.pages += 1
        self.total += 1
        self.norm += (seconds - self.norm) / min(self.total, NORM_PAGES)
        if self.pages == 1:
            self.recent = seconds
        else:
            self.recent += FAST_WEIGHT * (seconds - self.recent)
        if not self.slowdown or self.pages < MIN_PAGES or self.recent <= self.slowdown * self.norm:
            return None
        if self.blamed == self.browsers:
            return None  # found slow already; its restart is due
        if self.blamed == self.browsers - 1:
            # The browser before was restarted for this, and a fresh one is as
            # slow: the pages are, not the browser. Their pace is the new norm.
            self.norm = self.recent
            return None
        self.blamed = self.browsers
        return (
            f"its pages take {self.recent:.2f} s against {self.norm:.2f} s on average "
            f"(RENDER_SLOWDOWN_FACTOR={self.slowdown:g})"
        )

    def too_big(self, rss_mb: float) -> str | None:
        """Why a browser of ``rss_mb`` must restart, or None."""
        if self.max_rss_mb and rss_mb > self.max_rss_mb:
            return f"its processes use {rss_mb:.0f} MB (RENDER_MAX_RSS_MB={self.max_rss_mb})"
        return None

    def restarted(self) -> None:
        """A new browser: its own page count and recent pace start over."""
        self.browsers += 1
        self.pages = 0
        self.recent = 0.0


def browser_rss_mb(pid: int | None = None) -> float:
    """Summed RSS (MB) of the processes under this process' Playwright driver(s).

    The driver is a Node process this worker started; every Chromium process
    is below it. 0 when none runs.
    """
    try:
        me = psutil.Process(pid or os.getpid())
        drivers = [p for p in me.children() if p.name().startswith("node")]
    except psutil.Error:
        return 0.0
    total = 0
    for driver in drivers:
        try:
            below = driver.children(recursive=True)
        except psutil.Error:
            continue
        for process in below:
            try:
                total += process.memory_info().rss
            except psutil.Error:
                continue  # exited meanwhile
    return total / 2**20
