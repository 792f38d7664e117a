"""The rendering phase of ``make bench`` (``python -m tests.bench --skip ...`` runs it last).

One ``scrapy crawl distributed`` worker renders a local site whose content and
links exist only after scripts run (the tests' JS site: each page also asks
for images, a web font and a tracker script), with the default settings and
with the old defaults, and with each candidate for lighter renders alone
(``RENDER_VARIANTS``: full Chromium, a new page per URL, no garbage collection
between URLs, a fresh context per page, images left unloaded by Chromium,
fonts aborted by the route handler instead, a reused page's interception
turned off and on per URL (``handlers.py``), more or no
resource types blocked, one renderer process). For each run: rendered pages
per second, CPU seconds per page (the whole tree's, through ``reaper.py``, over
the whole run and between the first and the last item, and split by process
from samples), and
the peak memory of the worker's whole process tree
(Python, Playwright's Node driver, every Chromium process), sampled with
psutil. RSS is summed as asked; PSS (shared pages split between processes) is
the honest total, since Chromium's processes share much of their memory.

Then RENDER_MODE=auto against rendering every page and rendering none, on a
mixed site where one page in ten needs JavaScript: pages/s, CPU-s per page,
and the share of the site's pages stored with their real content.

Then the cost of configuring the rendering handler on a worker that renders
nothing: peak tree RSS of a plain HTTP crawl with Scrapy's own handler, with
ours (lazy: no driver until a page renders), and with stock scrapy-playwright
(which starts one Node driver per scheme when the engine starts).

The worker's counters are read from the stats it publishes to Redis; the
table is written by ``tests/bench/report.py`` with the others.
"""

from __future__ import annotations

import itertools
import json
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import psutil
import redis

from spiders_project.config import load_settings
from spiders_project.demo.site import SiteServer
from tests.support.processes import K, Proc
from tests.support.site import TRACKER_HOST, JsSite

MB = 1024 * 1024
HTTP11 = "scrapy.core.downloader.handlers.http11.HTTP11DownloadHandler"
STOCK_PLAYWRIGHT = "scrapy_playwright.handler.ScrapyPlaywrightDownloadHandler"
# Seconds before images, the font and the tracker script answer, as from a CDN or third party.
ASSET_LATENCY = 0.1


@dataclass
class TreeMemory:
    rss: int = 0
    pss: int = 0
    processes: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)


def _kind(name: str) -> str:
    if "chrom" in name or "headless_shell" in name:
        return "chromium"
    if name.startswith("node"):
        return "node"
    return "python"


def sample_tree(pid: int, cpu_seen: dict[int, tuple[str, float]] | None = None) -> TreeMemory:
    """Memory of ``pid`` and all its descendants, now (and their CPU into ``cpu_seen``)."""
    sample = TreeMemory()
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return sample
    for proc in procs:
        try:
            info = proc.memory_full_info()
            kind = _kind(proc.name())
            if cpu_seen is not None:
                times = proc.cpu_times()
                cpu_seen[proc.pid] = (kind, times.user + times.system)
        except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
            continue
        sample.rss += info.rss
        sample.pss += getattr(info, "pss", info.rss)
        sample.processes += 1
        sample.by_kind[kind] = sample.by_kind.get(kind, 0) + info.rss
    return sample


class PeakMemory(threading.Thread):
    """Samples a process tree every ``interval`` seconds; keeps the peaks."""

    def __init__(self, pid: int, interval: float = 0.5) -> None:
        super().__init__(daemon=True)
        self.pid, self.interval = pid, interval
        self.peak = TreeMemory()
        self.peak_pss = 0
        self.load = 0.0
        # (wall-clock time, CPU-s by kind so far) at each sample: the CPU spent
        # between two moments of the run (``cpu_between``).
        self.cpu_series: list[tuple[float, dict[str, float]]] = []
        # pid -> (kind, user+sys CPU seconds when last seen): the CPU split by
        # kind of process (a process's last interval before it exits is missed).
        self.cpu_seen: dict[int, tuple[str, float]] = {}
        self._stop_event = threading.Event()

    @property
    def cpu_by_kind(self) -> dict[str, float]:
        split: dict[str, float] = {}
        for kind, cpu in self.cpu_seen.values():
            split[kind] = split.get(kind, 0.0) + cpu
        return split

    def run(self) -> None:
        while not self._stop_event.is_set():
            sample = sample_tree(self.pid, self.cpu_seen)
            if sample.rss > self.peak.rss:
                self.peak = sample
            self.peak_pss = max(self.peak_pss, sample.pss)
            self.load = max(self.load, os.getloadavg()[0])
            self.cpu_series.append((time.time(), self.cpu_by_kind))
            self._stop_event.wait(self.interval)

    def stop(self) -> None:
        self._stop_event.set()
        self.join()

    def cpu_between(self, start: float, end: float) -> dict[str, float]:
        """CPU-s by kind spent between two wall-clock times, interpolated between samples."""
        at_start, at_end = self._cpu_at(start), self._cpu_at(end)
        return {kind: cpu - at_start.get(kind, 0.0) for kind, cpu in at_end.items()}

    def _cpu_at(self, when: float) -> dict[str, float]:
        series = self.cpu_series
        for (t0, cpu0), (t1, cpu1) in itertools.pairwise(series):
            if t0 <= when <= t1:
                share = (when - t0) / (t1 - t0) if t1 > t0 else 1.0
                kinds = cpu0.keys() | cpu1.keys()
                return {
                    k: cpu0.get(k, 0.0) + share * (cpu1.get(k, 0.0) - cpu0.get(k, 0.0))
                    for k in kinds
                }
        return series[-1][1] if series and when > series[-1][0] else {}


@dataclass
class Run:
    name: str
    pages: int
    wall: float  # worker start to exit, seconds
    steady: float  # pages/s between the first and the last item
    cpu_per_page: float  # worker tree user+sys CPU seconds per page
    peak: TreeMemory
    peak_pss: int
    stats: dict[str, int]
    load: float  # the machine's highest 1-minute load average seen during the run
    titles: dict[str, str] = field(default_factory=dict)  # url -> title stored
    cpu_by_kind: dict[str, float] = field(default_factory=dict)  # kind -> CPU-s per page
    # Between the first and the last item, start-up and shutdown left out: what
    # each further page costs a worker that runs for days.
    steady_cpu_per_page: float = 0.0
    steady_cpu_by_kind: dict[str, float] = field(default_factory=dict)


def run_worker(
    name: str, redis_url: str, seeds: list[str], settings: list[str], log_dir: Path
) -> Run:
    client = redis.Redis.from_url(redis_url)
    client.flushdb()
    client.lpush(K.start_urls, *seeds)
    # Under tests/bench/reaper.py, so that wait4 counts Chromium's orphaned processes too.
    argv = [sys.executable, "-m", "tests.bench.reaper"]
    argv += [sys.executable, "-m", "scrapy", "crawl", "distributed", "-s", "LOG_LEVEL=INFO"]
    for s in ["MAX_IDLE_TIME_BEFORE_CLOSE=2", *settings]:
        argv += ["-s", s]
    log_path = log_dir / f"{name}.log"
    started = time.monotonic()
    worker = Proc(name, argv, {"REDIS_URL": redis_url}, log_path)
    sampler = PeakMemory(worker.pid)
    sampler.start()
    # wait4: the CPU of the worker and every descendant (the reaper reaps them all).
    _, status, usage = os.wait4(worker.pid, 0)
    proc = worker.popen
    proc.returncode = os.waitstatus_to_exitcode(status)
    sampler.stop()
    worker.close()
    wall = time.monotonic() - started
    if proc.returncode != 0:
        raise SystemExit(f"{name}: worker exited {proc.returncode}; see {log_path}")
    items = [json.loads(x)["item"] for x in client.lrange(K.items, 0, -1)]
    # The one worker's stats hash (its pid is not the reaper's).
    (stats_key,) = [
        key for key in client.scan_iter(K.worker_stats("*")) if not key.endswith(b":heartbeat")
    ]
    published = client.hgetall(stats_key)
    client.close()
    stats = {k.decode(): v.decode() for k, v in published.items()}
    times = sorted(datetime.fromisoformat(i["fetched_at"]) for i in items)
    steady = sampler.cpu_between(times[0].timestamp(), times[-1].timestamp()) if times else {}
    span = (times[-1] - times[0]).total_seconds() if len(times) > 1 else 0.0
    names = (
        "render/pages",
        "render/browser_restarts",
        "render/contexts_recycled",
        "playwright/request_count/aborted",
        "render/browser_requests",
        "render/auto/expectation_failed",
        "render/auto/learned",
    )
    return Run(
        name=name,
        pages=len(items),
        wall=wall,
        steady=(len(items) - 1) / span if span else 0.0,
        cpu_per_page=(usage.ru_utime + usage.ru_stime) / max(1, len(items)),
        peak=sampler.peak,
        peak_pss=sampler.peak_pss,
        stats={n: int(stats.get(n, 0)) for n in names},
        load=sampler.load,
        titles={i["url"]: i.get("title") or "" for i in items},
        cpu_by_kind={k: v / max(1, len(items)) for k, v in sampler.cpu_by_kind.items()},
        steady_cpu_per_page=sum(steady.values()) / max(1, len(items) - 1),
        steady_cpu_by_kind={k: v / max(1, len(items) - 1) for k, v in steady.items()},
    )


def render_runs(
    redis_url: str,
    pages: int,
    images: int,
    concurrency: int,
    log_dir: Path,
    variants: tuple[tuple[str, tuple[str, ...]], ...],
) -> list[Run]:
    runs = []
    for name, settings in variants:
        settings = list(settings)
        settings.append(f"RENDER_CONCURRENCY={concurrency}")
        with JsSite(
            pages=pages, plain_pages=0, image_size=256, images=images, asset_latency=ASSET_LATENCY
        ) as site:
            seed = json.dumps({"url": site.url, "meta": {"playwright": True}})
            run = run_worker(f"render-{len(runs)}", redis_url, [seed], settings, log_dir)
        run.name = name
        if run.pages != pages:
            raise SystemExit(f"{name}: {run.pages} of {pages} pages rendered")
        # Same rendered DOM: every page's scripted title, whatever the variant.
        wrong = sorted(u for u, t in run.titles.items() if not t.startswith("JS page"))
        if wrong:
            raise SystemExit(f"{name}: {len(wrong)} pages rendered without content: {wrong[:3]}")
        runs.append(run)
        split = ", ".join(f"{k} {v:.3f}" for k, v in sorted(run.steady_cpu_by_kind.items()))
        print(
            f"  {name}: {run.pages} pages, {run.steady:.2f} pages/s, "
            f"{run.cpu_per_page:.3f} CPU-s/page, steady {run.steady_cpu_per_page:.3f} ({split})",
            flush=True,
        )
    return runs


# Launch options of the variants: the defaults, with another binary or other flags.
_DEFAULT_LAUNCH = load_settings().getdict("PLAYWRIGHT_LAUNCH_OPTIONS")
FULL_CHROMIUM = "/usr/bin/chromium"


def _launch(
    executable: str | None = None, add: tuple[str, ...] = (), drop: tuple[str, ...] = ()
) -> str:
    """The -s setting of the default launch options with another binary or other flags."""
    options = {**_DEFAULT_LAUNCH}
    if executable is not None:
        options["executable_path"] = executable
    options["args"] = [a for a in _DEFAULT_LAUNCH["args"] if a not in drop] + list(add)
    return "PLAYWRIGHT_LAUNCH_OPTIONS=" + json.dumps(options)


TRACKERS = f"RENDER_BLOCK_DOMAINS={TRACKER_HOST}"


def _handler(name: str) -> str:
    """The -s setting that makes ``tests/bench/handlers.py``'s ``name`` the handler."""
    path = f"tests.bench.handlers.{name}"
    return "DOWNLOAD_HANDLERS=" + json.dumps({"http": path, "https": path})


# (name, worker settings) of each rendering run; the first is the default.
RENDER_VARIANTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("defaults", (TRACKERS,)),
    (
        "the defaults before 2026-11-26 (full Chromium, a new page per URL, a GPU process, "
        "Node's own young generation, fonts aborted by the route handler, request events)",
        (
            TRACKERS,
            _handler("HandlerBefore"),
            _launch(FULL_CHROMIUM, drop=("--in-process-gpu",)),
            "RENDER_URLS_PER_PAGE=1",
            "RENDER_DRIVER_NODE_OPTIONS=",
        ),
    ),
    ("full Chromium (CHROMIUM_PATH=/usr/bin/chromium)", (TRACKERS, _launch(FULL_CHROMIUM))),
    (
        "one renderer process (--renderer-process-limit=1)",
        (TRACKERS, _launch(add=("--renderer-process-limit=1",))),
    ),
    ("no blocking", ("RENDER_BLOCK_RESOURCE_TYPES=", "RENDER_BLOCK_DOMAINS=")),
    # The candidates issue 14 weighed and set aside: make bench runs the five above
    # (KEPT_VARIANTS), `python -m tests.bench --render-variants all` every one (issue 42,
    # item 7: each costs about 12 s, mostly Chromium's start and stop).
    ("a new page per URL (RENDER_URLS_PER_PAGE=1)", (TRACKERS, "RENDER_URLS_PER_PAGE=1")),
    (
        "pages reused without garbage collection between URLs (RENDER_GC_BETWEEN_URLS=false)",
        (TRACKERS, "RENDER_GC_BETWEEN_URLS=false"),
    ),
    (
        "a fresh context per page (RENDER_PAGES_PER_CONTEXT=1)",
        (TRACKERS, "RENDER_PAGES_PER_CONTEXT=1"),
    ),
    (
        "images left unloaded by Chromium (RENDER_IMAGES_UNLOADED=true)",
        (TRACKERS, "RENDER_IMAGES_UNLOADED=true"),
    ),
    (
        "fonts requested, then aborted by the route handler; request events",
        (TRACKERS, _handler("RouteBlockingHandler")),
    ),
    (
        "a reused page's request interception turned off and on for each URL",
        (TRACKERS, _handler("RoutePerUrlHandler")),
    ),
    (
        "blocking stylesheets too",
        (TRACKERS, 'RENDER_BLOCK_RESOURCE_TYPES=["image", "font", "media", "stylesheet"]'),
    ),
)
KEPT_VARIANTS = 5


def mixed_runs(redis_url: str, pages: int, concurrency: int, log_dir: Path) -> list[Run]:
    """RENDER_MODE=auto, every page rendered, and none, on a site where one page in
    ten needs JavaScript (``JsSite``'s ``/m/<n>``)."""
    runs = []
    base = (TRACKERS, f"RENDER_CONCURRENCY={concurrency}")
    for name, settings, meta in (
        ("RENDER_MODE=auto", ("RENDER_MODE=auto",), {}),
        ("every page rendered", (), {"playwright": True}),
        ("no page rendered (RENDER_ENABLED=false)", ("RENDER_ENABLED=false",), {}),
    ):
        with JsSite(pages=1, plain_pages=0, slow_pages=0, mixed_pages=pages) as site:
            seed = json.dumps({"url": site.page_url(0, "m"), "meta": meta})
            run = run_worker(f"mixed-{len(runs)}", redis_url, [seed], [*base, *settings], log_dir)
            expected = {
                url: ("JS mixed " if url in site.mixed_js_urls() else "Mixed ")
                + url.rsplit("/", 1)[1]
                for url in site.mixed_urls()
            }
        run.name = name
        run.stats["content"] = sum(run.titles.get(u) == t for u, t in expected.items())
        runs.append(run)
        print(
            f"  mixed site, {name}: {run.stats['content']} of {pages} pages with their "
            f"content, {run.steady:.1f} pages/s",
            flush=True,
        )
    return runs


def http_runs(redis_url: str, pages: int, log_dir: Path) -> list[Run]:
    runs = []
    for name, handler in (
        ("Scrapy's HTTP handler only", HTTP11),
        ("our rendering handler (lazy)", None),
        ("stock scrapy-playwright handler", STOCK_PLAYWRIGHT),
    ):
        # The site is on 127.0.0.1: without this project's handler, the network
        # guard's resolver would refuse it (it hears of no unguarded connection).
        settings = ["ALLOW_PRIVATE_NETWORKS=true"]
        if handler is not None:
            settings.append(f"DOWNLOAD_HANDLERS={json.dumps({'http': handler, 'https': handler})}")
        with SiteServer(pages=pages, seed=7, dead_links=False, offsite_links=False) as site:
            run = run_worker(f"http-{len(runs)}", redis_url, [site.url], settings, log_dir)
        run.name = name
        runs.append(run)
        print(f"  plain HTTP, {name}: peak RSS {run.peak.rss / MB:.0f} MB", flush=True)
    return runs


@dataclass
class RenderingResult:
    """What the rendering phase measured, and with what."""

    pages: int
    images: int
    concurrency: int
    render: list[Run]
    http: list[Run]
    mixed: list[Run] = field(default_factory=list)
    mixed_pages: int = 0


def rendering_phase(
    redis_url: str,
    log_dir: Path,
    *,
    pages: int,
    http_pages: int,
    images: int = 4,
    concurrency: int | None = None,
    every_variant: bool = True,
) -> RenderingResult:
    """Both rendering runs, then the plain HTTP runs (``http_pages=0``: none);
    ``every_variant=False``: only ``KEPT_VARIANTS`` of ``RENDER_VARIANTS``."""
    if concurrency is None:
        concurrency = load_settings().getint("RENDER_CONCURRENCY")
    log_dir.mkdir(parents=True, exist_ok=True)
    print(f"Rendering {pages} pages per variant (logs in {log_dir})", flush=True)
    variants = RENDER_VARIANTS if every_variant else RENDER_VARIANTS[:KEPT_VARIANTS]
    render = render_runs(redis_url, pages, images, concurrency, log_dir, variants)
    mixed_pages = 2 * pages
    print(f"A mixed site of {mixed_pages} pages, one in ten needing JavaScript", flush=True)
    mixed = mixed_runs(redis_url, mixed_pages, concurrency, log_dir)
    http = []
    if http_pages:
        print(f"Plain HTTP crawls of {http_pages} pages", flush=True)
        http = http_runs(redis_url, http_pages, log_dir)
    return RenderingResult(pages, images, concurrency, render, http, mixed, mixed_pages)
