"""Freshness for the same fetches (issue 28): adaptive revisits against a fixed RECRAWL_AFTER,
with real processes.

``python -m tests.bench.freshness [--minute 6] [--warm-up 30] [--window 10]``

Two setups run side by side, each with its own private redis-server, its own
SQLite database, one worker and one db_writer, crawling its own copy of a
local site (``TimetableSite``): 100 pages linked as a binary tree from ``/``,
of which 10 (``/p/5``, ``/p/15``, ... ``/p/95``) change every minute, on a
timetable (version ``1 + minutes since the site started``), and 90 never
change. Every page sends an ETag and honours ``If-None-Match`` (a 304).

- *fixed*: ``RECRAWL_AFTER`` = 5 minutes (the interval the budget affords:
  100 pages at 20 fetches a minute), every URL revisited at that interval;
- *adaptive*: the same ``RECRAWL_AFTER`` as the first interval,
  ``RECRAWL_ADAPTIVE=true`` (``RECRAWL_DEC_RATE`` 0.2, ``RECRAWL_INC_RATE``
  0.4 by default), ``RECRAWL_MIN_INTERVAL`` = 1 minute, ``RECRAWL_MAX_INTERVAL``
  = 1 day.

Both: ``RECRAWL_LINKS=false`` (a link never brings a page back: every refetch
is a revisit the db_writer pushed), and the same budget of fetches, enforced
the same way, by the cluster-wide host delay: ``DOWNLOAD_DELAY`` = one minute
over ``--budget`` (20), less ``POLITENESS_GUARD`` (added to every delay by the
dispatch gate). The fetches each setup actually made are counted from its
site's log, and printed.

**Time is scaled.** A "minute" is ``--minute`` real seconds (6 by default: a
scale of 10), and every interval the crawl uses is scaled by the same factor:
the site's timetable, ``RECRAWL_AFTER``, ``RECRAWL_MIN_INTERVAL`` and
``RECRAWL_MAX_INTERVAL``, ``DOWNLOAD_DELAY``, ``RECRAWL_SCHEDULE_EVERY`` (1 s
scaled) and ``SEED_POLL_INTERVAL`` (1 s scaled). What is not scaled is the
processes' own latency (a fetch, a page-state entry reaching the db_writer),
which is then 10 times larger against the intervals than at real speed.

**Caught changes.** A fetch *catches a change* when the site served it a
version of the page other than the one it served that page's previous fetch
(a 200 or a 304 serves the page's current version): the change is caught when
the page is fetched after it changed and before it changes again, or after
later changes, which then count once, as the ``pages`` table's ``changes``
counts them. Counted from the site's own log of what version it served when,
the ``pages`` table's ``SUM(changes)`` printed next to it as a check.

**Windows.** Time 0 is the end of the first crawl (the moment the site has
served every page once; the first crawl is under the same budget, so it takes
about 5 minutes). Two windows of ``--window`` minutes are counted, by the
time of the fetch: the first, from time 0, and the one after ``--warm-up``
minutes of revisits (the rates need visits to learn), as
``tests/unit/test_recrawl_freshness.py`` does with a stepped clock. Each window
holds 10 pages x 10 minutes = 100 changes. Printed per window and setup: the
fetches (and per minute), the 304s, the fetches of the changing pages and the
mean minutes since each one's previous fetch of that page, and the changes
caught.
"""

from __future__ import annotations

import argparse
import os
import platform
import sqlite3
import tempfile
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from tests.support.processes import Proc, db_writer, worker
from tests.support.services import RedisServer
from tests.support.threaded_site import ThreadedSite

PAGES = 100
HOT = frozenset(range(5, PAGES, 10))  # 10 pages that change every minute
POLITENESS_GUARD = 0.03  # settings.POLITENESS_GUARD, added to every non-zero delay


@dataclass(frozen=True)
class Served:
    at: float  # time.time() when the site answered
    page: int
    version: int
    status: int


class TimetableSite(ThreadedSite):
    """``/`` (page 0) and ``/p/<n>`` as a binary tree (n links to 2n+1 and 2n+2).

    A page of ``hot`` is at version ``1 + (now - start) // minute``, any other
    at version 1. The ETag names the version; a matching ``If-None-Match``
    gets a 304. ``served`` logs every answer with the version it stood for.
    """

    def __init__(self, pages: int, hot: frozenset[int], minute: float) -> None:
        self.pages = pages
        self.hot = hot
        self.minute = minute
        self.start = time.time()
        self.served: list[Served] = []
        self._lock = threading.Lock()
        super().__init__()

    def version(self, page: int, at: float) -> int:
        return 1 + int((at - self.start) // self.minute) if page in self.hot else 1

    def log(self) -> list[Served]:
        with self._lock:
            return list(self.served)

    def _answer(self, handler: BaseHTTPRequestHandler) -> None:
        path = handler.path
        page = 0 if path == "/" else int(path[3:]) if path.startswith("/p/") else -1
        if not 0 <= page < self.pages:
            handler.send_response(404)
            handler.send_header("Content-Length", "0")
            handler.end_headers()
            return
        at = time.time()
        version = self.version(page, at)
        etag = f'"{page}-{version}"'
        status = 304 if handler.headers.get("If-None-Match") == etag else 200
        with self._lock:
            self.served.append(Served(at, page, version, status))
        handler.send_response(status)
        handler.send_header("ETag", etag)
        if status == 304:
            handler.end_headers()
            return
        links = "".join(
            f'<a href="/p/{c}">{c}</a> ' for c in (2 * page + 1, 2 * page + 2) if c < self.pages
        )
        body = (
            f"<html><head><title>Page {page} v{version}</title></head>"
            f"<body><p>Version {version}</p>{links}</body></html>"
        ).encode()
        handler.send_header("Content-Type", "text/html; charset=utf-8")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)


@dataclass
class Window:
    start: float  # minutes after the first crawl
    minutes: float
    fetches: int = 0
    not_modified: int = 0
    caught: int = 0
    hot_fetches: int = 0
    hot_gaps: list[float] = field(default_factory=list)  # minutes since the page's last fetch

    @property
    def hot_gap(self) -> float:
        """Mean minutes between two fetches of a changing page (fetches in the window)."""
        return sum(self.hot_gaps) / len(self.hot_gaps) if self.hot_gaps else float("nan")

    @property
    def possible(self) -> int:
        return len(HOT) * round(self.minutes)


def count(log: list[Served], minute: float, windows: list[Window]) -> float:
    """Fill ``windows`` from a site's log; returns time 0 (the end of the first crawl)."""
    log = sorted(log, key=lambda s: s.at)
    seen: set[int] = set()
    t0 = None
    for s in log:
        seen.add(s.page)
        if len(seen) == PAGES:
            t0 = s.at
            break
    if t0 is None:
        raise RuntimeError(f"the first crawl did not end: {len(seen)} pages served")
    last: dict[int, Served] = {}
    for s in log:
        before = last.get(s.page)
        changed = before is not None and before.version != s.version
        last[s.page] = s
        t = (s.at - t0) / minute
        for w in windows:
            if w.start <= t < w.start + w.minutes:
                w.fetches += 1
                w.not_modified += s.status == 304
                w.caught += changed
                if s.page in HOT:
                    w.hot_fetches += 1
                    if before is not None:
                        w.hot_gaps.append((s.at - before.at) / minute)
    return t0


@dataclass
class Setup:
    name: str
    settings: tuple[str, ...]
    folder: Path
    site: TimetableSite
    redis: RedisServer | None = None
    procs: list[Proc] = field(default_factory=list)

    @property
    def db_path(self) -> Path:
        return self.folder / "items.db"

    def start(self) -> None:
        self.redis = RedisServer()
        self.procs.append(
            db_writer(
                f"dbw-{self.name}",
                self.redis.url,
                f"sqlite:///{self.db_path}",
                self.folder,
                *[a for s in self.settings for a in ("-s", s)],
            )
        )
        self.procs.append(
            worker(f"worker-{self.name}", self.redis.url, self.folder, *self.settings)
        )
        self.redis.client.lpush("distributed:start_urls", self.site.url)

    def check(self) -> None:
        for p in self.procs:
            if not p.alive():
                raise RuntimeError(f"{p.name} exited: {p.log()[-3000:]}")

    def sum_changes(self) -> int:
        with sqlite3.connect(self.db_path, timeout=10) as db:
            return int(db.execute("SELECT COALESCE(SUM(changes), 0) FROM pages").fetchone()[0])

    def stop(self) -> None:
        for p in self.procs:
            p.stop()
            p.close()
        if self.redis is not None:
            self.redis.stop()


def settings(minute: float, budget: int, adaptive: bool) -> tuple[str, ...]:
    after = 5 * minute  # 300 s scaled: 100 pages at 20 fetches a minute
    common = (
        f"RECRAWL_AFTER={after}",
        "RECRAWL_LINKS=false",
        f"RECRAWL_SCHEDULE_EVERY={minute / 60}",
        f"SEED_POLL_INTERVAL={minute / 60}",
        "SEED_SPREAD=1",
        f"DOWNLOAD_DELAY={minute / budget - POLITENESS_GUARD}",
        "MAX_IDLE_TIME_BEFORE_CLOSE=0",
        "ROBOTSTXT_OBEY=false",
        "LOG_LEVEL=INFO",
    )
    if not adaptive:
        return common
    return (
        *common,
        "RECRAWL_ADAPTIVE=true",
        f"RECRAWL_MIN_INTERVAL={minute}",  # 60 s scaled
        f"RECRAWL_MAX_INTERVAL={1440 * minute}",  # a day scaled
    )


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


@dataclass
class FreshnessResult:
    minute: float
    budget: int
    warm_up: float
    window: float
    settings: dict[str, tuple[str, ...]] = field(default_factory=dict)
    windows: dict[str, list[Window]] = field(default_factory=dict)
    caught_in_all: dict[str, int] = field(default_factory=dict)  # the site's log
    table_changes: dict[str, int] = field(default_factory=dict)  # pages: SUM(changes)
    fetches_in_all: dict[str, int] = field(default_factory=dict)

    def ratio(self, i: int) -> float:
        return self.windows["adaptive"][i].caught / max(1, self.windows["fixed"][i].caught)


def freshness_phase(
    minute: float, budget: int, warm_up: float, window: float, folder: Path
) -> FreshnessResult:
    """Run both setups side by side until the second window has ended for both."""
    folder.mkdir(parents=True, exist_ok=True)
    print(f"freshness: a minute is {minute:g} s (time scaled {60 / minute:g}x); logs in {folder}")
    result = FreshnessResult(minute, budget, warm_up, window)
    setups: list[Setup] = []
    try:
        for name in ("fixed", "adaptive"):
            site = TimetableSite(PAGES, HOT, minute).__enter__()
            sub = folder / name
            sub.mkdir(exist_ok=True)
            setups.append(Setup(name, settings(minute, budget, name == "adaptive"), sub, site))
        for s in setups:
            s.start()
            result.settings[s.name] = s.settings
            print(f"  {s.name}: {' '.join(s.settings)}", flush=True)
        # Time 0 is each one's first crawl's end, about 5 minutes in.
        end = warm_up + window
        deadline = time.time() + (end + 15) * minute + 120
        while True:
            time.sleep(minute / 2)
            for s in setups:
                s.check()
            done = []
            for s in setups:
                try:
                    t0 = count(s.site.log(), minute, [])
                except RuntimeError:
                    done.append(False)
                    continue
                done.append(time.time() > t0 + end * minute + 1)
            if all(done):
                break
            if time.time() > deadline:
                raise RuntimeError("the run did not end in time")
        result.table_changes = {s.name: s.sum_changes() for s in setups}
        logs = {s.name: s.site.log() for s in setups}
    finally:
        for s in setups:
            s.stop()
            s.site.__exit__()
    for name, log in logs.items():
        result.windows[name] = [Window(0.0, window), Window(warm_up, window)]
        count(log, minute, result.windows[name])
        by_page = sorted(log, key=lambda s: (s.page, s.at))
        result.caught_in_all[name] = sum(
            1
            for a, b in zip(by_page, by_page[1:], strict=False)
            if a.page == b.page and a.version != b.version
        )
        result.fetches_in_all[name] = len(log)
    return result


def table(result: FreshnessResult) -> list[str]:
    """The figures, a Markdown table and a line per setup."""
    out = [
        "| Window (scaled minutes after the first crawl) | Setup | Fetches | per minute"
        " | 304s | Fetches of changing pages | Their mean gap (min) | Changes caught | of"
        " | Caught adaptive / fixed |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for i in range(2):
        for name in ("fixed", "adaptive"):
            w = result.windows[name][i]
            ratio = f"{result.ratio(i):.2f}x" if name == "adaptive" else ""
            out.append(
                f"| {w.start:g}-{w.start + w.minutes:g} | {name} | {w.fetches} "
                f"| {w.fetches / w.minutes:.1f} | {w.not_modified} | {w.hot_fetches} "
                f"| {w.hot_gap:.2f} | {w.caught} | {w.possible} | {ratio} |"
            )
    out.append("")
    for name in ("fixed", "adaptive"):
        out.append(
            f"- {name}: {result.fetches_in_all[name]} fetches in all; changes caught in all:"
            f" {result.caught_in_all[name]} by the site's log, {result.table_changes[name]}"
            " by the pages table's SUM(changes)"
        )
    return out


def section(result: FreshnessResult) -> list[str]:
    """The section of docs/BENCHMARKS.md the ``freshness`` phase of ``make bench`` writes."""
    after = result.windows["adaptive"][1].start
    return [
        "## Freshness: adaptive against fixed revisits, last `make bench`",
        "",
        "`tests/bench/freshness.py` (the hand-written section on issue 28 explains the setups):"
        f" time scaled {60 / result.minute:g}x (a minute is {result.minute:g} real seconds,"
        f" every interval scaled alike), {result.budget} fetches a minute at most on both,"
        f" windows of {result.window:g} minutes from the end of the first crawl and after"
        f" {after:g} minutes of revisits. Adaptive / fixed changes caught:"
        f" {result.ratio(0):.2f}x in the first window, {result.ratio(1):.2f}x after warm-up"
        " (issue 28 asks for 2x).",
        "",
        *table(result),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minute", type=float, default=6.0, help="real seconds per minute")
    parser.add_argument("--budget", type=int, default=20, help="fetches per (scaled) minute")
    parser.add_argument("--warm-up", type=float, default=30.0, help="minutes before the 2nd window")
    parser.add_argument("--window", type=float, default=10.0, help="minutes counted per window")
    parser.add_argument("--log-dir", type=Path, default=None, help="keep the processes' logs here")
    args = parser.parse_args(argv)
    folder = args.log_dir or Path(tempfile.mkdtemp(prefix="bench-freshness-"))
    print(f"  {os.cpu_count()} CPUs, {cpu_model()}")
    result = freshness_phase(args.minute, args.budget, args.warm_up, args.window, folder)
    print()
    print("\n".join(table(result)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
