"""The benchmark's tables, printed and written to docs/BENCHMARKS.md: its one writer.

Each run rewrites the ``## `` sections of the phases it ran (a skipped phase
leaves its section as the last run that measured it wrote it) and keeps every
other section as it finds it, so notes written by hand stay.
"""

from __future__ import annotations

import os
import platform
import re
import subprocess
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path

import psutil

from spiders_project.config import load_settings
from tests.bench.archive import ArchiveResult
from tests.bench.archive import section as archive_section
from tests.bench.cluster import ClusterResult
from tests.bench.crawls import CrawlResult
from tests.bench.db_writer import WriterResult
from tests.bench.distance import DistanceResult
from tests.bench.distance import section as distance_section
from tests.bench.freshness import FreshnessResult
from tests.bench.freshness import section as freshness_section
from tests.bench.jobs import JobsResult
from tests.bench.jobs import section as jobs_section
from tests.bench.jobs import targets as jobs_targets
from tests.bench.queue_entries import QueueResult
from tests.bench.rendering import ASSET_LATENCY, MB, RenderingResult
from tests.bench.seen import SeenResult

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "docs" / "BENCHMARKS.md"

TARGET_RATIO = 0.9
TARGET_RENDER_CPU = 0.15
TARGET_RENDER_PSS_MB = 500
TARGET_ROUND_TRIPS = 3.0
TARGET_RSS_GROWTH = 100e6
# The shortest whole-site crawl the RSS growth is judged over: the row names the pages it
# was measured over (the memory phase's site, tests/bench/memory.py, since make bench had to
# fit in 10 minutes: issue 29, item 6), and the growth is not flat in the pages (+16 to
# +20 MB over 15,000 to 30,000 pages, +27 MB over 100,000 on 2026-11-27).
RSS_GROWTH_MIN_PAGES = 10_000
TARGET_WRITER = {"SQLite": 50_000, "PostgreSQL": 50_000}
TARGET_SECONDS = 600
# Cores taken by processes outside the benchmark above which a crawl's figures are flagged.
DISTURBED_CORES = 0.25


@dataclass
class Report:
    command: str
    started: datetime
    seconds: float = 0.0
    site_pages: int = 0
    small_pages: int = 0  # the second site's (tests/bench/memory.py); 0: not built
    window: int = 0
    pinned: bool = False
    crawls: dict[str, CrawlResult] = field(default_factory=dict)
    writers: list[WriterResult] = field(default_factory=list)
    seen: list[SeenResult] = field(default_factory=list)
    queue: list[QueueResult] = field(default_factory=list)
    rendering: RenderingResult | None = None
    cluster: ClusterResult | None = None
    distance: DistanceResult | None = None
    jobs: JobsResult | None = None
    archive: ArchiveResult | None = None
    freshness: FreshnessResult | None = None
    # The whole-site crawl of the memory phase (tests/bench/memory.py).
    memory: CrawlResult | None = None
    # The freshness phase ran beside the seen-set and the queue (tests/bench/beside.py).
    freshness_beside: bool = False
    # Rendering's plain HTTP runs ran on CPU 1 while freshness ended (memory figures only).
    http_beside: bool = False


BESIDE = (
    " The freshness phase ran at the same time on the other core (CPU 0; this on CPU 1),"
    " as `tests/bench/beside.py` explains."
)


def machine() -> str:
    model = "unknown CPU"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    redis_version = subprocess.run(
        ["redis-server", "--version"], capture_output=True, text=True
    ).stdout.split()
    redis_v = next((w[2:] for w in redis_version if w.startswith("v=")), "?")
    return (
        f"{os.cpu_count()} cores ({model}), {psutil.virtual_memory().total / 2**30:.0f} GiB RAM; "
        f"Python {platform.python_version()}, Scrapy {version('scrapy')}, "
        f"scrapy-redis {version('scrapy-redis')}, redis-py {version('redis')}, "
        f"redis-server {redis_v}"
    )


def _f(value: float | None, fmt: str = "{:,.0f}") -> str:
    return "n/a" if value is None else fmt.format(value)


def _ok(passed: bool | None) -> str:
    return "—" if passed is None else ("met" if passed else "**missed**")


def targets(report: Report) -> list[str]:
    rows = []
    plain = report.crawls.get("plain")
    one = report.crawls.get("worker")
    if plain and one:
        ratio = one.pages_per_s / plain.pages_per_s
        rows.append(
            (
                f"One worker ≥ {TARGET_RATIO}× plain Scrapy's pages/s",
                f"{ratio:.2f}× ({one.pages_per_s:,.0f} vs {plain.pages_per_s:,.0f} pages/s)",
                ratio >= TARGET_RATIO,
            )
        )
    if one and one.round_trips_per_page is not None:
        rows.append(
            (
                f"Redis round trips per crawled page ≤ {TARGET_ROUND_TRIPS:.0f} "
                "(dedup, enqueue, lease, ack, items)",
                f"{one.round_trips_per_page:.2f}",
                one.round_trips_per_page <= TARGET_ROUND_TRIPS,
            )
        )
    whole = report.memory
    if whole and whole.full:
        growth = whole.rss_end - whole.rss_start
        rows.append(
            (
                f"Worker RSS growth over {whole.full['pages']:,.0f} pages < 100 MB",
                f"{growth / 1e6:+.0f} MB "
                f"({whole.rss_start / 1e6:.0f} → {whole.rss_end / 1e6:.0f} MB)",
                # No RSS read at the end (0): not measured, never "met".
                growth < TARGET_RSS_GROWTH
                if whole.full["pages"] >= RSS_GROWTH_MIN_PAGES and whole.rss_end > 0
                else None,
            )
        )
    if report.distance is not None:
        for workers, median in ((w, report.distance.median(w)) for w in (1, 2)):
            if median is not None:
                rows.append(
                    (
                        f"10 ms RTT to Redis, {workers} worker{'s' if workers > 1 else ''}: "
                        f"≥ {TARGET_RATIO}× the pages/s on loopback (issue 26)",
                        f"{median:.2f}× (median of {len(report.distance.of(workers))} pairs)",
                        median >= TARGET_RATIO,
                    )
                )
    if report.jobs is not None:
        rows += jobs_targets(report.jobs)
    for writer in report.writers:
        target = TARGET_WRITER.get(writer.database)
        if target is None:
            continue  # the pages table's rows: a figure, no target (issue 28)
        rows.append(
            (
                f"db_writer into {writer.database} ≥ {target:,} items/s",
                f"{writer.items_per_s:,.0f} items/s" if not writer.error else "failed",
                writer.items_per_s >= target,
            )
        )
    if report.rendering is not None and report.rendering.render:
        default = report.rendering.render[0]
        rows.append(
            (
                f"A simple rendered page ≤ {TARGET_RENDER_CPU} CPU-s (issue 14's aim; "
                "a running worker's, start-up and shutdown left out)",
                f"{default.steady_cpu_per_page:.3f} CPU-s "
                f"({default.cpu_per_page:.3f} with start-up and shutdown)",
                default.steady_cpu_per_page <= TARGET_RENDER_CPU,
            )
        )
        rows.append(
            (
                f"A render worker ≤ {TARGET_RENDER_PSS_MB} MB PSS at "
                f"RENDER_CONCURRENCY={report.rendering.concurrency} (issue 14's aim)",
                f"{default.peak_pss / MB:.0f} MB",
                default.peak_pss / MB <= TARGET_RENDER_PSS_MB,
            )
        )
    rows.append(
        (
            "`make bench` under 10 minutes",
            f"{report.seconds / 60:.1f} min",
            report.seconds < TARGET_SECONDS if report.seconds else None,
        )
    )
    lines = ["## Against the targets", "", "| Target | Measured | |", "|---|---|---|"]
    lines += [f"| {t} | {m} | {_ok(p)} |" for t, m, p in rows]
    return lines


def _second_site(report: Report) -> str:
    if not report.small_pages:
        return ""
    return (
        f"Every setup but plain Scrapy and the first worker crawls a second site, of "
        f"{report.small_pages:,} pages, so that its window is the same fifth of its site as"
        f" theirs was of the first before `make bench` had to fit in 10 minutes (how far into"
        f" its site a crawl is sets how many new links a page brings: `tests/bench/memory.py`)."
        " "
    )


def throughput(report: Report) -> list[str]:
    plain = report.crawls.get("plain")
    pin = (
        "Single-worker setups run pinned to CPU 0 and the site, Redis and the benchmark to "
        "CPU 1; the two workers, the site and Redis share both cores."
        if report.pinned
        else "Nothing is pinned (fewer than 2 CPUs)."
    )
    lines = [
        "## Throughput and cost per page",
        "",
        f"One local site of {report.site_pages:,} pages (about 10 links each, all on the site's "
        f"host; served by a separate process), crawled from its root by each setup in turn; "
        f"figures cover each crawl's first *Pages* pages. {_second_site(report)}"
        "CONCURRENT_REQUESTS=32, "
        f"CONCURRENT_REQUESTS_PER_DOMAIN=16 and every other setting as in "
        f"`spiders_project/settings.py` for all of them. {pin}",
        "",
        "| Setup | Pages | Pages/s | × plain | Worker CPU ms/page | Peak RSS of a worker "
        "| Redis commands/page | Round trips/page | Redis CPU s/10k pages "
        "| One Redis saturates at | Site CPU | Other load |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for key in ("plain", "worker", "wait", "cluster", "two", "stock"):
        r = report.crawls.get(key)
        if r is None:
            continue
        ratio = f"{r.pages_per_s / plain.pages_per_s:.2f}×" if plain else "n/a"
        failed = [code for code in r.exit_codes if code != 0]
        name = f"{r.name} (**exit {failed}**)" if failed else r.name
        lines.append(
            f"| {name} | {r.window:,} | {r.pages_per_s:,.0f} | {ratio} | {r.cpu_ms_per_page:.2f} "
            f"| {r.rss_peak / 1e6:.0f} MB "
            f"| {_f(r.commands_per_page, '{:.1f}')} | {_f(r.round_trips_per_page, '{:.2f}')} "
            f"| {_f(r.redis_cpu_per_10k, '{:.2f}')} "
            f"| {_f(r.redis_ceiling, '{:,.0f} pages/s')} "
            f"| {r.site_core_share:.0%} | {r.other_cores:.2f} cores |"
        )
    lines.append("")
    busy = max((r.other_cores for r in report.crawls.values()), default=0.0)
    if busy > DISTURBED_CORES:
        lines += [
            f"**Disturbed run**: other processes on the machine took up to {busy:.2f} cores "
            "during these crawls (column *Other load*); pages/s are lower than on an idle "
            "machine and differ between setups by more than their own cost. CPU per page is "
            "the steadier comparison.",
            "",
        ]
    for key in ("worker", "stock"):
        r = report.crawls.get(key)
        if r is None or not r.top_commands:
            continue
        top = ", ".join(f"{cmd.upper()} {n:.2f}" for cmd, n in r.top_commands[:10] if n >= 0.005)
        lines.append(f"- Redis commands per page, {r.name}: {top}.")
    return lines


def memory(report: Report) -> list[str]:
    one = report.memory
    stock = report.crawls.get("stock")
    lines = ["## Memory", ""]
    if one is None or not one.full:
        return lines + ["Not run."]
    full = one.full
    lines += [
        f"One worker crawled the whole of the second site, {one.pages_total - 1:,} pages"
        " (`tests/bench/memory.py`: smaller than the first, to keep `make bench` in 10"
        " minutes; pinned as in the throughput table, same settings) "
        f"(the site served {one.pages_total:,} pages, the worker "
        f"scraped {one.items:,} items; "
        f"{full['pages_per_s']:,.0f} pages/s, {full['cpu_ms_per_page']:.2f} ms CPU/page, "
        f"{full['commands_per_page']:.1f} Redis commands/page, "
        f"{full['redis_cpu_per_10k']:.2f} Redis CPU s/10k pages over the whole crawl).",
        "",
        "| Measure | Value |",
        "|---|---:|",
        f"| Worker RSS when the first page was served | {one.rss_start / 1e6:.0f} MB |",
        f"| Worker RSS after {full['pages']:,.0f} pages | {one.rss_end / 1e6:.0f} MB |",
        f"| Growth | {(one.rss_end - one.rss_start) / 1e6:+.0f} MB |",
        f"| Redis memory per seen URL (used_memory growth without the item buffer, "
        f"/ {full['seen']:,.0f} fingerprints; frontier empty) | "
        f"{full['redis_bytes_per_seen']:.0f} bytes |",
        f"| of which the seen-set's keys, per fingerprint "
        f"| {_f(one.dupefilter_bytes_per_fp, '{:.1f} bytes')} |",
    ]
    if stock is not None and stock.dupefilter_bytes_per_fp:
        lines.append(
            f"| stock scrapy-redis dupefilter set, per fingerprint | "
            f"{stock.dupefilter_bytes_per_fp:.0f} bytes |"
        )
    return lines


def seen_set(report: Report) -> list[str]:
    lines = [
        "## The seen-set: Redis memory and CPU per seen URL",
        "",
        "A fresh redis-server records N fingerprints (SHA1s, as Scrapy's fingerprinter"
        " gives) through the script workers run (`lua/seen_add.lua`), 5,000 per call; the"
        " previous release's layout is scrapy-redis' SADD of 40-hex strings. *Bytes/URL*"
        " is the growth of `used_memory` over N; *Redis CPU* its user+sys CPU over the"
        " inserts; *In its keys* the sum of `MEMORY USAGE` (SAMPLES 0) of the set's own keys"
        " over N, without the fixed costs `used_memory` also grows by (Lua, the key table)."
        " Bloom is sized for exactly N URLs at an error rate of 1e-7; *timed* is `exact` with"
        " the time of each URL's last enqueue (`RECRAWL_AFTER` set)."
        + (BESIDE if report.freshness_beside else ""),
        "",
        "| Layout | URLs | Bytes/URL | In its keys | Redis CPU µs/URL | Keys |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {s.layout} | {s.urls:,} | {s.bytes_per_url:.1f} | {s.key_bytes_per_url:.1f}"
        f" | {s.redis_cpu_us_per_url:.2f} | {s.keys:,} |"
        for s in report.seen
    ]
    return lines


def queued(report: Report) -> list[str]:
    lines = [
        "## The frontier's queues: Redis memory per queued request",
        "",
        "A fresh redis-server queues N requests of the benchmark crawl's shape (a followed"
        " link: callback, parent as Referer, depth) on one host (`tests/bench/queue_entries.py`)."
        " *Before* is the previous release's entry (long JSON keys, the Referer whole, `scope`"
        " in meta) in the host's sorted set; *after* goes through `lua/enqueue.lua` as workers"
        " send it. *Bytes/request* is `MEMORY USAGE` (SAMPLES 0) of the host's queue keys over"
        " N; the seen-set is not counted (its own section)."
        + (BESIDE if report.freshness_beside else ""),
        "",
        "| Layout | Requests | Bytes/request | JSON bytes | Redis type (encoding) |",
        "|---|---:|---:|---:|---|",
    ]
    lines += [
        f"| {q.layout} | {q.requests:,} | {q.bytes_per_request:.1f} | {q.entry_bytes}"
        f" | {q.encoding} |"
        for q in report.queue
    ]
    return lines


# Memory of each master given to the seen-set, for the projection's URL column.
SEEN_GB_PER_MASTER = 10


def cluster(report: Report) -> list[str]:
    result = report.cluster
    assert result is not None
    lines = [
        "## Redis Cluster: one worker on 3 masters, and a projection",
        "",
        "A Redis Cluster of three masters (`redis-server --cluster-enabled yes`, joined by"
        " `redis-cli --cluster create`, on CPU 1 with the site) and one worker with"
        " `REDIS_CLUSTER=true`; the frontier is in three shards (`FRONTIER_SHARDS` auto), and"
        " the site's one host, so all its requests, in one of them (`tests/bench/cluster.py`)."
        " Its pages/s are in the throughput table (*Redis Cluster of 3 masters*), against one"
        " Redis in the same run. Below, each master's Redis CPU per page over the crawl, less"
        " what it spends idle (cluster bus, cron), measured for"
        " 3 s before.",
        "",
        "| Master | Holds | Redis CPU µs/page | Saturates at |",
        "|---|---|---:|---:|",
    ]
    for i, (held, us) in enumerate(result.masters, 1):
        ceiling = f"{1e6 / us:,.0f} pages/s" if us > 0 else "n/a"
        lines.append(f"| {i} | {held} | {us:.1f} | {ceiling} |")
    lines += [
        "",
        "The site has one host, so one shard (one master) does all of the frontier's work per"
        " page; the others show what an idle shard costs (the worker's lease calls visit every"
        " shard) and what the spider's own keys cost (items, seeds, stats: the first master"
        " beyond the least busy other one). **Projection**: the cluster spends"
        f" {result.total_us:.0f} µs of Redis CPU per page in all (one Redis, above: its"
        " *Redis CPU s/10k pages*); with N masters, N shards and hosts spread evenly, each"
        " master takes an N-th of the frontier's share, and the first also the spider's own"
        f" ({result.own_us:.1f} µs); the cluster saturates when that master does. URLs: the"
        f" seen-set's bytes per URL measured in the shards' keys ({result.seen_bytes_per_url:.1f}),"
        f" with {SEEN_GB_PER_MASTER} GB of each master given to it; queued requests cost about"
        " 80 bytes each on top while they wait (section *The frontier's queues*).",
        "",
        "| Masters | Pages/s at saturation | Seen URLs |",
        "|---:|---:|---:|",
    ]
    for n in (1, 3, 10, 30):
        urls = n * SEEN_GB_PER_MASTER * 1e9 / max(result.seen_bytes_per_url, 1e-9)
        lines.append(f"| {n} | {result.capacity(n):,.0f} | {urls:.2g} |")
    return lines


def _writer_target(database: str) -> str:
    target = TARGET_WRITER.get(database)
    return f"{target:,} items/s" if target else "–"


def writers(report: Report) -> list[str]:
    lines = [
        "## db_writer",
        "",
        "Per database (`tests/bench/db_writer.py`): N items (about 400 "
        "bytes of JSON each) pushed into a scratch item buffer in the private Redis, then the "
        "real db_writer process drains it (DB_WRITER_BATCH_SIZE as configured, "
        "DB_WRITER_MAX_WAIT=0). PostgreSQL is a temporary cluster on a free port. The *pages*"
        " rows are the `pages` table (issue 28): as many page-state entries, one per fetch"
        " outcome of a distinct URL, drained the same way into one row per URL.",
        "",
        "| Database | Items | Items/s (first batch → empty buffer) | Drain time incl. "
        "process start-up | Target |",
        "|---|---:|---:|---:|---:|",
    ]
    for w in report.writers:
        if w.error:
            lines.append(
                f"| {w.database} | failed: {' '.join(w.error.split())[:200]} | | | "
                f"{_writer_target(w.database)} |"
            )
            continue
        lines.append(
            f"| {w.database} | {w.items:,} | {w.items_per_s:,.0f} | {w.drain_s:.1f} s "
            f"| {_writer_target(w.database)} |"
        )
    return lines


def method(report: Report) -> list[str]:
    return [
        "## How it is measured",
        "",
        "- **Pages/s**: from the site's own arrival times of the window's first and last "
        "page (one clock for every process of the machine).",
        "- **Worker CPU**: user+system seconds of the crawler process(es) (psutil, sampled "
        "every 0.2 s) between the first page and the end of the window, per page served.",
        "- **Redis commands/page**: `INFO commandstats` delta of the private redis-server over "
        "the same interval, every command counted, including those a Lua script or a "
        "MULTI/EXEC runs (the benchmark's own INFO excluded).",
        "- **Round trips/page**: the worker's stat `redis/round_trips` (every request/reply "
        "exchange with Redis: a MULTI/EXEC of the write batcher, a lease script, a seed "
        "read, ...) over its `item_scraped_count`, whole run, as it publishes them to Redis; "
        "for stock scrapy-redis the same count is taken by wrapping redis-py (one per "
        "command, one per pipeline), and it and plain Scrapy leave their final stats in a file.",
        "- **Redis CPU**: `INFO cpu` used_cpu_sys+used_cpu_user delta; *One Redis saturates "
        "at* = 10,000 / (Redis CPU s per 10k pages), the pages/s at which one Redis core "
        "would be fully busy with this load.",
        "- **Site CPU**: the site process's CPU over the window, as a share of one core; "
        "**Other load**: the machine's busy CPU time minus that of the benchmark's own "
        "processes, in cores (anything above 0.1 means the figures are disturbed).",
        "- **Memory**: the worker's RSS when the site served its first page and at the last "
        "sample before it exited (the crawl then is complete); Redis memory per seen URL is "
        "the growth of `used_memory` minus `MEMORY USAGE` of the item buffer, per fingerprint.",
        "- Plain Scrapy keeps Scrapy's default order (LIFO, depth-first); the frontier is "
        "FIFO within a priority (breadth-first); stock scrapy-redis orders by priority and "
        "then by pickle bytes. A window of a larger site keeps every setup in the middle of "
        "a crawl. Plain Scrapy JSON-encodes each item like the worker's pipeline, then "
        "drops it.",
        f"- Raw results: `{report.command}` writes `results.json` and every process's log to "
        "its log directory.",
    ]


def rendering(report: Report) -> list[str]:
    result = report.rendering
    assert result is not None
    chromium = subprocess.run(
        [load_settings().getdict("PLAYWRIGHT_LAUNCH_OPTIONS")["executable_path"], "--version"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    lines = [
        "## Rendering",
        "",
        f"`{report.command}` on {report.started:%Y-%m-%d}, {os.cpu_count()} cores, {chromium}. "
        f"One worker, RENDER_CONCURRENCY={result.concurrency}, other settings at their "
        "defaults. Each page of the local site waits for its script's fetch() (150 ms) and "
        f"then for network idle (500 ms quiet), and asks for {result.images} 256x256 PNG(s), "
        f"a web font and a tracker script, which answer after {ASSET_LATENCY * 1000:.0f} ms. "
        "Pages/s is measured from the first item to the last; memory is the peak over the "
        "worker's process tree (Python + Node driver + Chromium), sampled every 0.5 s; CPU is "
        "user+sys of the whole tree, Chromium's processes that outlive the browser included "
        "(the worker runs under a subreaper, tests/bench/reaper.py: runs before 2026-11-26 "
        "02:45 UTC missed them and reported about two thirds of the CPU), split by kind of "
        "process from the same samples (a process's last half second is missed). *Steady* "
        "is the CPU between the first and the last item (interpolated between samples) over "
        "the pages after the first: what each further page costs a worker that runs for "
        "days, without the start-up of Python, the driver and Chromium and the shutdown "
        "that the whole run's figure spreads over its pages. Load is "
        "the machine's highest 1-minute load average during the run: above the core count, "
        "other processes competed for the CPU and pages/s is lower than this worker alone "
        "would get.",
        "",
        "| Rendered pages | Pages | Pages/s | Wall s | CPU-s/page, whole run "
        "| CPU-s/page, steady | of which Chromium / driver / Python | Peak RSS (sum) MB "
        "| of which Chromium MB | Peak PSS MB | Requests aborted | Load |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for run in result.render:
        split = " / ".join(
            f"{run.steady_cpu_by_kind.get(kind, 0.0):.3f}"
            for kind in ("chromium", "node", "python")
        )
        lines.append(
            f"| {run.name} | {run.pages} | {run.steady:.2f} | {run.wall:.0f} "
            f"| {run.cpu_per_page:.3f} | {run.steady_cpu_per_page:.3f} | {split} "
            f"| {run.peak.rss / MB:.0f} "
            f"| {run.peak.by_kind.get('chromium', 0) / MB:.0f} | {run.peak_pss / MB:.0f} "
            f"| {run.stats['playwright/request_count/aborted']} "
            f"of {run.stats['render/browser_requests']} | {run.load:.1f} |"
        )
    if result.mixed:
        lines += [
            "",
            f"RENDER_MODE=auto against rendering every page and rendering none, on a mixed site "
            f"of {result.mixed_pages} pages where one page in ten is a script-built shell (the "
            "others plain HTML with their links; the shells' links exist only once rendered). "
            "*Content* counts the site's pages stored with their real title; CPU-s per page "
            "divides the worker tree's CPU by the pages stored.",
            "",
            "| Mixed site | Pages stored | Content | Pages/s | CPU-s/page | Renders "
            "| of which after a failed expectation | Peak PSS MB |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for run in result.mixed:
            lines.append(
                f"| {run.name} | {run.pages} | {run.stats['content']} of {result.mixed_pages} "
                f"| {run.steady:.1f} | {run.cpu_per_page:.3f} | {run.stats['render/pages']} "
                f"| {run.stats['render/auto/expectation_failed']} | {run.peak_pss / MB:.0f} |"
            )
    if result.http:
        lines += [
            "",
            f"A worker that renders nothing (plain HTTP crawl of {result.http[0].pages} pages): "
            "what configuring a Playwright handler costs."
            + (
                " These ran pinned to CPU 1 while the freshness phase ended on CPU 0: their"
                " figures are memory and processes, which the core does not change."
                if report.http_beside
                else ""
            ),
            "",
            "| DOWNLOAD_HANDLERS | Peak RSS (sum) MB | Processes at peak |",
            "|---|---:|---:|",
        ]
        lines += [f"| {r.name} | {r.peak.rss / MB:.0f} | {r.peak.processes} |" for r in result.http]
    return lines


def sections(report: Report) -> list[list[str]]:
    """The sections this run measured, in the file's order."""
    out = [targets(report)]
    if report.crawls:
        out += [throughput(report), memory(report)]
    if report.seen:
        out.append(seen_set(report))
    if report.queue:
        out.append(queued(report))
    if report.cluster is not None:
        out.append(cluster(report))
    if report.distance is not None:
        out.append(distance_section(report.distance))
    if report.jobs is not None:
        out.append(jobs_section(report.jobs))
    if report.archive is not None:
        out.append(archive_section(report.archive))
    if report.writers:
        out.append(writers(report))
    if report.freshness is not None:
        fresh = freshness_section(report.freshness)
        if report.freshness_beside:
            fresh[2] += (
                " It ran beside the seen-set and the queued requests, in a process of its own"
                " pinned to CPU 0 while they kept CPU 1 (`tests/bench/beside.py`)."
            )
        out.append(fresh)
    if report.rendering is not None:
        out.append(rendering(report))
    out.append(method(report))
    return out


def header(report: Report) -> list[str]:
    return [
        "# Benchmarks",
        "",
        f"`{report.command}` (what `make bench` runs), "
        f"{report.started:%Y-%m-%d %H:%M} UTC, {report.seconds / 60:.1f} min. "
        f"Machine: {machine()}.",
        "",
    ]


def render(report: Report) -> str:
    body = "\n\n".join("\n".join(s) for s in sections(report))
    return "\n".join(header(report)) + "\n" + body + "\n"


def merge(text: str, report: Report) -> str:
    """``text`` (the file as it is) with this run's header and sections in place.

    A section this run wrote replaces the one of the same heading; the others
    (phases this run skipped, notes written by hand) stay, in their order.
    """
    ours = {s[0]: "\n".join(s) for s in sections(report)}
    kept: list[str] = []
    for section in re.split(r"(?m)^(?=## )", text):
        heading = section.split("\n", 1)[0]
        if section.startswith("## ") and heading not in ours:
            kept.append(section.rstrip("\n"))
    out = "\n".join(header(report)) + "\n" + "\n\n".join(ours.values())
    if kept:
        out += "\n\n" + "\n\n".join(kept)
    return out + "\n"


def write(report: Report, path: Path = BENCHMARKS) -> None:
    """Rewrite this run's sections of ``path``; keep every other ``## `` section."""
    text = path.read_text() if path.exists() else ""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(merge(text, report))


def now() -> datetime:
    return datetime.now(UTC)
