"""Rendering benchmark: ``python -m tests.bench.bench_rendering [--pages 600]``.

One ``scrapy crawl distributed`` worker renders a local site whose content and
links exist only after scripts run (:class:`~spiders_project.rendering.site.JsSite`:
each page also asks for an image, a web font and a tracker script), once with
the default resource blocking and once with none. For each run: rendered pages
per second, CPU seconds per page, and the peak memory of the worker's whole
process tree (Python, Playwright's Node driver, every Chromium process), sampled
with psutil. RSS is summed as asked; PSS (shared pages split between processes)
is the honest total, since Chromium's processes share much of their memory.

Then the cost of configuring the rendering handler on a worker that renders
nothing: peak tree RSS of a plain HTTP crawl with Scrapy's own handler, with
ours (lazy: no driver until a page renders), and with stock scrapy-playwright
(which starts one Node driver per scheme when the engine starts).

The table is printed and written to docs/BENCHMARKS.md under ``## Rendering``
(other sections of that file are left alone); ``--no-write`` only prints.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import psutil
import redis
from mirakuru import TCPExecutor
from port_for import get_port

from spiders_project.config import load_settings
from spiders_project.demo.site import SiteServer
from tests.support.js_site import TRACKER_HOST, JsSite
from tests.support.processes import K

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "docs" / "BENCHMARKS.md"
HEADING = "## Rendering"
MB = 1024 * 1024
HTTP11 = "scrapy.core.downloader.handlers.http11.HTTP11DownloadHandler"
STOCK_PLAYWRIGHT = "scrapy_playwright.handler.ScrapyPlaywrightDownloadHandler"
# Seconds before images, the font and the tracker script answer, as from a CDN or third party.
ASSET_LATENCY = 0.1


@dataclass
class Sample:
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


def sample_tree(pid: int) -> Sample:
    """Memory of ``pid`` and all its descendants, now."""
    sample = Sample()
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return sample
    for proc in procs:
        try:
            info = proc.memory_full_info()
            kind = _kind(proc.name())
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
        self.peak = Sample()
        self.peak_pss = 0
        self.load = 0.0
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.is_set():
            sample = sample_tree(self.pid)
            if sample.rss > self.peak.rss:
                self.peak = sample
            self.peak_pss = max(self.peak_pss, sample.pss)
            self.load = max(self.load, os.getloadavg()[0])
            self._stop_event.wait(self.interval)

    def stop(self) -> None:
        self._stop_event.set()
        self.join()


@dataclass
class Run:
    name: str
    pages: int
    wall: float  # worker start to exit, seconds
    steady: float  # pages/s between the first and the last item
    cpu_per_page: float  # worker tree user+sys CPU seconds per page
    peak: Sample
    peak_pss: int
    stats: dict[str, int]
    load: float  # the machine's highest 1-minute load average seen during the run


def stat(log: str, name: str) -> int:
    match = re.search(rf"'{re.escape(name)}': (\d+)", log)
    return int(match.group(1)) if match else 0


def run_worker(
    name: str, redis_url: str, seeds: list[str], settings: list[str], log_dir: Path
) -> Run:
    client = redis.Redis.from_url(redis_url)
    client.flushdb()
    client.lpush(K.start_urls, *seeds)
    argv = [sys.executable, "-m", "scrapy", "crawl", "distributed", "-s", "LOG_LEVEL=INFO"]
    for s in ["MAX_IDLE_TIME_BEFORE_CLOSE=2", *settings]:
        argv += ["-s", s]
    log_path = log_dir / f"{name}.log"
    started = time.monotonic()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            argv,
            cwd=ROOT,
            env={**os.environ, "REDIS_URL": redis_url},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        sampler = PeakMemory(proc.pid)
        sampler.start()
        # wait4: the CPU of the worker and every descendant it (transitively) reaped.
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        sampler.stop()
    wall = time.monotonic() - started
    text = log_path.read_text(errors="replace")
    if proc.returncode != 0:
        raise SystemExit(f"{name}: worker exited {proc.returncode}; see {log_path}")
    items = [json.loads(x) for x in client.lrange(K.items, 0, -1)]
    client.close()
    times = sorted(datetime.fromisoformat(i["fetched_at"]) for i in items)
    span = (times[-1] - times[0]).total_seconds() if len(times) > 1 else 0.0
    names = (
        "render/pages",
        "render/browser_restarts",
        "render/contexts_recycled",
        "playwright/request_count/aborted",
        "playwright/request_count",
    )
    return Run(
        name=name,
        pages=len(items),
        wall=wall,
        steady=(len(items) - 1) / span if span else 0.0,
        cpu_per_page=(usage.ru_utime + usage.ru_stime) / max(1, len(items)),
        peak=sampler.peak,
        peak_pss=sampler.peak_pss,
        stats={n: stat(text, n) for n in names},
        load=sampler.load,
    )


def render_runs(
    redis_url: str, pages: int, images: int, concurrency: int, log_dir: Path
) -> list[Run]:
    runs = []
    for name, settings in (
        (
            "blocking images, fonts, media, trackers (default)",
            [f"RENDER_BLOCK_DOMAINS={TRACKER_HOST}"],
        ),
        ("no blocking", ["RENDER_BLOCK_RESOURCE_TYPES=", "RENDER_BLOCK_DOMAINS="]),
    ):
        settings.append(f"RENDER_CONCURRENCY={concurrency}")
        with JsSite(
            pages=pages, plain_pages=0, image_size=256, images=images, asset_latency=ASSET_LATENCY
        ) as site:
            seed = json.dumps({"url": site.url, "meta": {"playwright": True}})
            run = run_worker(f"render-{len(runs)}", redis_url, [seed], settings, log_dir)
        run.name = name
        if run.pages != pages:
            raise SystemExit(f"{name}: {run.pages} of {pages} pages rendered")
        runs.append(run)
        print(f"  {name}: {run.pages} pages, {run.steady:.2f} pages/s", flush=True)
    return runs


def http_runs(redis_url: str, pages: int, log_dir: Path) -> list[Run]:
    runs = []
    for name, handler in (
        ("Scrapy's HTTP handler only", HTTP11),
        ("our rendering handler (lazy)", None),
        ("stock scrapy-playwright handler", STOCK_PLAYWRIGHT),
    ):
        settings = []
        if handler is not None:
            settings.append(f"DOWNLOAD_HANDLERS={json.dumps({'http': handler, 'https': handler})}")
        with SiteServer(pages=pages, seed=7, dead_links=False, offsite_links=False) as site:
            run = run_worker(f"http-{len(runs)}", redis_url, [site.url], settings, log_dir)
        run.name = name
        runs.append(run)
        print(f"  plain HTTP, {name}: peak RSS {run.peak.rss / MB:.0f} MB", flush=True)
    return runs


def table(command: str, render: list[Run], http: list[Run], images: int, concurrency: int) -> str:
    chromium = subprocess.run(
        [os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium"), "--version"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    lines = [
        HEADING,
        "",
        f"`{command}` on {datetime.now(UTC):%Y-%m-%d}, {os.cpu_count()} cores, {chromium}. "
        f"One worker, RENDER_CONCURRENCY={concurrency}, other settings at their defaults. "
        "Each page of the local site waits for its script's fetch() (150 ms) and then for "
        f"network idle (500 ms quiet), and asks for {images} 256x256 PNG(s), a web font and "
        f"a tracker script, which answer after {ASSET_LATENCY * 1000:.0f} ms. Pages/s is "
        "measured from the first item to the last; memory is "
        "the peak over the worker's process tree (Python + Node driver + Chromium), sampled "
        "every 0.5 s; CPU is user+sys of the whole tree. Load is the machine's highest "
        "1-minute load average during the run: above the core count, other processes "
        "competed for the CPU and pages/s is lower than this worker alone would get.",
        "",
        "| Rendered pages | Pages | Pages/s | Wall s | CPU-s/page | Peak RSS (sum) MB "
        "| of which Chromium MB | Peak PSS MB | Sub-requests aborted | Load |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for run in render:
        lines.append(
            f"| {run.name} | {run.pages} | {run.steady:.2f} | {run.wall:.0f} "
            f"| {run.cpu_per_page:.2f} | {run.peak.rss / MB:.0f} "
            f"| {run.peak.by_kind.get('chromium', 0) / MB:.0f} | {run.peak_pss / MB:.0f} "
            f"| {run.stats['playwright/request_count/aborted']} "
            f"of {run.stats['playwright/request_count']} | {run.load:.1f} |"
        )
    if http:
        lines += [
            "",
            f"A worker that renders nothing (plain HTTP crawl of {http[0].pages} pages): "
            "what configuring a Playwright handler costs.",
            "",
            "| DOWNLOAD_HANDLERS | Peak RSS (sum) MB | Processes at peak |",
            "|---|---:|---:|",
        ]
        for run in http:
            lines.append(f"| {run.name} | {run.peak.rss / MB:.0f} | {run.peak.processes} |")
    return "\n".join(lines) + "\n"


def write_section(section: str, path: Path = BENCHMARKS) -> None:
    """Replace (or add) the ``## Rendering`` section, leaving the rest of the file alone."""
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    pattern = re.compile(rf"^{re.escape(HEADING)}\n.*?(?=^## |\Z)", re.MULTILINE | re.DOTALL)
    if pattern.search(text):
        text = pattern.sub(lambda _: section + "\n", text, count=1)
    else:
        text = text.rstrip("\n") + "\n\n" + section
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text.rstrip("\n") + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=600, help="rendered pages per run")
    parser.add_argument("--http-pages", type=int, default=2000, help="pages of the HTTP runs")
    parser.add_argument("--images", type=int, default=4, help="images on each rendered page")
    parser.add_argument(
        "--concurrency",
        type=int,
        default=load_settings().getint("RENDER_CONCURRENCY"),
        help="RENDER_CONCURRENCY (default: the project's)",
    )
    parser.add_argument("--skip-http", action="store_true", help="only the rendering runs")
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument("--log-dir", type=Path, default=Path("/tmp/bench_rendering"))
    args = parser.parse_args(argv)
    args.log_dir.mkdir(parents=True, exist_ok=True)
    port = get_port(None)
    executor = TCPExecutor(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", ""],
        host="127.0.0.1",
        port=port,
        timeout=30,
    )
    executor.start()
    try:
        url = f"redis://127.0.0.1:{port}/0"
        print(f"Rendering {args.pages} pages twice (logs in {args.log_dir})", flush=True)
        render = render_runs(url, args.pages, args.images, args.concurrency, args.log_dir)
        http = []
        if not args.skip_http:
            print(f"Plain HTTP crawls of {args.http_pages} pages", flush=True)
            http = http_runs(url, args.http_pages, args.log_dir)
    finally:
        executor.stop()
    command = " ".join(["python -m tests.bench.bench_rendering", *(argv or sys.argv[1:])])
    section = table(command, render, http, args.images, args.concurrency)
    print()
    print(section)
    if not args.no_write:
        write_section(section)
        print(f"Written to {BENCHMARKS.relative_to(ROOT)} ({HEADING})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
