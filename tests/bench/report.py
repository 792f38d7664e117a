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

from tests.bench import memory as memory_section
from tests.bench.archive import ArchiveResult
from tests.bench.archive import section as archive_section
from tests.bench.cluster import ClusterResult
from tests.bench.cluster_section import PROJECTED
from tests.bench.cluster_section import section as cluster_section
from tests.bench.crawls import CrawlResult
from tests.bench.db_writer import TARGET_WRITER_US, WriterResult
from tests.bench.db_writer import section as writers_section
from tests.bench.distance import DistanceResult
from tests.bench.distance import section as distance_section
from tests.bench.freshness import FreshnessResult
from tests.bench.freshness import section as freshness_section
from tests.bench.jobs import JobsResult
from tests.bench.jobs import section as jobs_section
from tests.bench.jobs import targets as jobs_targets
from tests.bench.method import method
from tests.bench.queue_entries import QueueResult
from tests.bench.queue_entries import section as queue_section
from tests.bench.rendering import MB, RenderingResult
from tests.bench.rendering_section import section as rendering_section
from tests.bench.seen import SeenResult
from tests.bench.seen import section as seen_section

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
    # ... and beside distance before them (issue 42, item 7).
    freshness_beside_distance: bool = False
    # Rendering's plain HTTP runs ran on CPU 1 while freshness ended (memory figures only).
    http_beside: bool = False
    # Wall seconds of each phase, in the order run (issue 42, item 7: where the 10 minutes go).
    phases: dict[str, float] = field(default_factory=dict)


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
    if report.cluster is not None:
        c = report.cluster
        worst = min(c.linearity(n) for n in PROJECTED[1:])
        rows.append(
            (
                f"Redis Cluster: N masters ≥ {TARGET_RATIO}·N× one master's pages/s, up to "
                f"{PROJECTED[-1]} (issue 42; projected from per-master Redis CPU)",
                ", ".join(f"{n}: {c.linearity(n):.2f}" for n in PROJECTED[1:])
                + " (·N×); if every worker visits every shard: "
                + ", ".join(f"{c.linearity(n, True):.2f}" for n in PROJECTED[1:]),
                worst >= TARGET_RATIO,
            )
        )
    if report.jobs is not None:
        rows += jobs_targets(report.jobs)
    for writer in report.writers:
        target = TARGET_WRITER_US.get(writer.database)
        if target is None:
            continue  # the pages table's rows: a figure, no target (issue 28)
        budget = writer.budget
        rows.append(
            (
                f"db_writer into {writer.database} ≤ {target:g} µs of CPU per item, every"
                " process together (issue 42)",
                f"{budget.total_us:.1f} µs ({writer.items_per_s:,.0f} items/s; two cores allow"
                f" {budget.cores_allow:,.0f})"
                if budget is not None and not writer.error
                else "failed",
                budget is not None and not writer.error and budget.total_us <= target,
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


def sections(report: Report) -> list[list[str]]:
    """The sections this run measured, in the file's order."""
    out = [targets(report)]
    if report.crawls:
        out += [
            throughput(report),
            memory_section.section(report.memory, report.crawls.get("stock")),
        ]
    if report.seen:
        out.append(seen_section(report.seen, report.freshness_beside))
    if report.queue:
        out.append(queue_section(report.queue, report.freshness_beside))
    if report.cluster is not None:
        out.append(cluster_section(report.cluster))
    if report.distance is not None:
        distance = distance_section(report.distance)
        if report.freshness_beside_distance:
            distance[2] += (
                " The freshness phase ran at the same time, in a process of its own pinned to"
                " CPU 0 (a few tenths of a core: `tests/bench/beside.py`), beside both sides of"
                " every pair."
            )
        out.append(distance)
    if report.jobs is not None:
        out.append(jobs_section(report.jobs))
    if report.archive is not None:
        out.append(archive_section(report.archive))
    if report.writers:
        out.append(writers_section(report.writers))
    if report.freshness is not None:
        fresh = freshness_section(report.freshness)
        if report.freshness_beside:
            fresh[2] += (
                " It ran beside "
                + ("the distance phase, " if report.freshness_beside_distance else "")
                + "the seen-set and the queued requests, in a process of its own"
                " pinned to CPU 0 while they kept CPU 1 (`tests/bench/beside.py`)."
            )
        out.append(fresh)
    if report.rendering is not None:
        out.append(
            rendering_section(report.rendering, report.command, report.started, report.http_beside)
        )
    out.append(method(report.command))
    return out


def header(report: Report) -> list[str]:
    return [
        "# Benchmarks",
        "",
        f"`{report.command}` (what `make bench` runs), "
        f"{report.started:%Y-%m-%d %H:%M} UTC, {report.seconds / 60:.1f} min. "
        f"Machine: {machine()}.",
        "",
        *(
            [
                "Seconds per phase: "
                + ", ".join(f"{name} {s:.0f}" for name, s in report.phases.items())
                + ".",
                "",
            ]
            if report.phases
            else []
        ),
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
