"""``make bench``: one runner, made of phases, with one report.

    python -m tests.bench [--pages 100000] [--window 10000] [--skip stock,two] [--no-write]

The frontier against plain Scrapy and stock scrapy-redis, side by side, then
the db_writer and rendering; under 10 minutes on 2 cores with the defaults.

One run starts a private redis-server and a local site of ``--pages`` pages (a
process of its own), then, one after the other on that site:

1. plain Scrapy with the ``distributed`` spider's parse, its in-memory scheduler, no
   Redis (until ``--window`` pages), then one ``scrapy crawl distributed`` worker
   until ``--window`` pages;
2. memory (``memory.py``): the same worker crawls the whole of a second site of
   ``--small-pages`` pages, for its RSS and Redis' bytes per seen URL at the end;
   every later crawl but the jobs' is on that site;
3. the worker with a replica of Redis confirming its writes (WAIT), one worker on a
   Redis Cluster of three masters (``cluster.py``: a site of its own, of 6 hosts
   spread over the shards), each until ``--setups-window`` pages, then stock
   scrapy-redis (its Scheduler, PriorityQueue, RFPDupeFilter, pickle, RedisPipeline,
   RedisSpider) until ``--stock-window`` pages;
4. two workers until ``--setups-window`` pages; then jobs (``jobs.py``, on the first
   site): one worker with crawl jobs against a checkout of this commit with jobs
   switched off (``no_jobs.py``; ``--jobs-baseline`` may name commits), alternately,
   ``--jobs-pairs`` pairs of ``--jobs-window`` pages; then the archive
   (``archive.py``): one worker without and with ``WARC_ENABLED``, alternately,
   ``--archive-pairs`` pairs of ``--archive-window`` pages; then distance
   (``distance.py``): one and two workers each 5 ms from Redis through a delay relay,
   against loopback, alternately, ``--distance-pairs`` pairs of ``--distance-window``
   pages;
5. the seen-set: Redis bytes and CPU per seen URL, at 10^5 and 10^6 URLs, for the
   previous release's set of hex strings and each ``DUPEFILTER_MODE`` (``seen.py``),
   and Redis bytes per queued request, before and after (``queue_entries.py``);
   beside distance and them, on the crawlers' core, freshness (``freshness.py``,
   about 2.5 minutes; ``beside.py``): adaptive against fixed revisits, two private
   setups side by side, time scaled (``--freshness-minute`` real seconds);
6. the db_writer into SQLite and a temporary PostgreSQL (``--writer-items`` items);
7. rendering (``tests/bench/rendering.py``): ``--render-pages`` rendered once per variant
   (``--render-variants``: five of them, or all twelve), then ``--render-http-pages``
   over plain HTTP with three download handlers.

Each phase's wall seconds are printed as it starts (``== <phase> (<t> s)``) and
written to the report's header and ``results.json`` (``phases``).

Redis and PostgreSQL come from ``tests/support/services.py``, the starters the
tests use. Results are printed and written to docs/BENCHMARKS.md by
``tests/bench/report.py`` (``--no-write``: printed only); logs and
``results.json`` go to ``--log-dir``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from tests.bench import report as rep
from tests.bench.archive import archive_phase
from tests.bench.beside import Beside
from tests.bench.cluster import cluster_phase
from tests.bench.crawls import Bench, summary_line
from tests.bench.db_writer import pages_phase, writer_phase
from tests.bench.distance import distance_phase
from tests.bench.freshness import FreshnessResult, freshness_phase
from tests.bench.jobs import BASELINE, jobs_phase
from tests.bench.memory import memory_phase, second_bench
from tests.bench.queue_entries import queue_phase
from tests.bench.rendering import Run, http_runs, rendering_phase
from tests.bench.results import results
from tests.bench.seen import seen_phase
from tests.bench.site_proc import Site
from tests.support.services import RedisServer, pin

PHASES = (
    "plain",
    "worker",
    "memory",
    "wait",
    "cluster",
    "stock",
    "two",
    "jobs",
    "archive",
    "distance",
    "seen",
    "queue",
    "writer",
    "freshness",
    "rendering",
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.bench", description=__doc__.split("\n", 1)[0]
    )
    # The defaults keep `make bench` under 10 minutes on 2 cores (issue 29, item 6; 27 minutes
    # before). Plain Scrapy against one worker keeps its 100,000-page site: plain Scrapy's
    # cost per page grows with its in-memory frontier, so a smaller site flatters it
    # (docs/BENCHMARKS.md, "make bench in 10 minutes"). The other setups, whose cost per
    # page does not move with the site, take shorter windows of it.
    parser.add_argument("--pages", type=int, default=100_000, help="pages of the site")
    parser.add_argument(
        "--window", type=int, default=10_000, help="pages of plain Scrapy's and the worker's"
    )
    parser.add_argument(
        "--setups-window",
        type=int,
        default=3_000,
        help="pages of the WAIT, Redis Cluster and two-worker crawls",
    )
    parser.add_argument(
        "--small-pages",
        type=int,
        default=15_000,
        help="pages of the second site: the memory phase crawls all of it, every setup "
        "but plain Scrapy and the worker windows of it (tests/bench/memory.py)",
    )
    parser.add_argument(
        "--stock-window",
        type=int,
        default=1_500,
        help="pages of the stock scrapy-redis crawl (at about half the worker's speed)",
    )
    parser.add_argument("--distance-window", type=int, default=1_500)
    parser.add_argument("--distance-pairs", type=int, default=2, help="pairs of each setup")
    parser.add_argument("--distance-workers", default="1,2", help="the distance setups run")
    parser.add_argument("--jobs-window", type=int, default=5_000, help="pages, of the first site")
    parser.add_argument("--jobs-pairs", type=int, default=2, help="pairs with and without jobs")
    parser.add_argument(
        "--jobs-baseline",
        default=BASELINE,
        help="'stripped' (this commit with jobs switched off: tests/bench/no_jobs.py) or "
        "commit(s) without jobs, comma-separated (each checked out in a temporary git worktree)",
    )
    parser.add_argument("--archive-window", type=int, default=1_500)
    parser.add_argument("--archive-pairs", type=int, default=1, help="pairs without/with WARC")
    parser.add_argument("--writer-items", type=int, default=100_000)
    parser.add_argument("--freshness-minute", type=float, default=3.0, help="seconds a minute")
    parser.add_argument("--freshness-warm-up", type=float, default=30.0, help="minutes")
    parser.add_argument(
        "--set",
        dest="settings",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a Scrapy setting for every crawler (experiments; repeatable)",
    )
    parser.add_argument("--skip", default="", help=f"comma-separated, of {','.join(PHASES)}")
    # Rendering's 18 runs each pay about 5 s of Chromium's start and stop: 20 pages keep
    # the phase near 2.5 minutes and 4 renders at a time for most of each run.
    parser.add_argument("--render-pages", type=int, default=20, help="rendered pages per run")
    parser.add_argument(
        "--render-variants",
        choices=("kept", "all"),
        default="kept",
        help="kept: the defaults and four others (rendering.py, KEPT_VARIANTS); all: every one",
    )
    parser.add_argument(
        "--render-http-pages", type=int, default=300, help="pages of the plain HTTP runs (0: none)"
    )
    parser.add_argument("--no-write", action="store_true", help="do not touch BENCHMARKS.md")
    parser.add_argument("--log-dir", type=Path, default=Path("/tmp/bench"))
    args = parser.parse_args(argv)
    skip = {s for s in args.skip.split(",") if s}
    if skip - set(PHASES):
        parser.error(f"unknown phase(s) {sorted(skip - set(PHASES))}")
    if args.window > args.pages:
        parser.error("--window must not exceed --pages")
    if max(args.setups_window, args.stock_window, args.distance_window) > args.small_pages:
        parser.error("--setups-window, --stock-window, --distance-window exceed --small-pages")
    if args.archive_window > args.small_pages or args.jobs_window > args.pages:
        parser.error("--archive-window or --jobs-window exceeds its site")
    args.log_dir.mkdir(parents=True, exist_ok=True)
    command = " ".join(["python -m tests.bench", *(argv if argv is not None else sys.argv[1:])])
    report = rep.Report(command=command, started=rep.now(), window=args.window)
    t0 = time.monotonic()
    marks: list[tuple[str, float]] = []  # each phase's name and start, seconds from t0

    def mark(name: str) -> None:
        marks.append((name, time.monotonic() - t0))
        print(f"== {name} ({marks[-1][1]:.0f} s)", flush=True)

    # Crawlers on CPU 0; the site, Redis and this process on CPU 1.
    pinned = (os.cpu_count() or 1) >= 2
    crawl_cpus = {0} if pinned else None
    service_cpus = {1} if pinned else None
    report.pinned = pinned
    if pinned:
        pin(os.getpid(), service_cpus)

    freshness_args = (
        args.freshness_minute,
        20,
        args.freshness_warm_up,
        10.0,
        args.log_dir / "freshness",
    )
    # Freshness mostly sleeps (a few tenths of a core): where there are two cores it runs
    # beside distance (whose figures are ratios of pairs that alternate, so both sides of
    # a pair run beside it), the seen-set and the queue, on the crawlers' core, while the
    # services keep theirs (tests/bench/beside.py; issue 42, item 7).
    fresh: Beside[FreshnessResult] | None = None

    def start_freshness(name: str) -> Beside[FreshnessResult] | None:
        if "freshness" in skip or not pinned or {"seen", "queue"} <= skip:
            return None
        mark(name)
        report.freshness_beside = True
        return Beside(crawl_cpus or set(), freshness_phase, *freshness_args)

    crawls = PHASES[: PHASES.index("seen")]  # the phases that crawl, in order
    crawls_wanted = [p for p in crawls if p not in skip]
    redis = RedisServer(datadir=args.log_dir / "redis", cpus=service_cpus)
    try:
        if crawls_wanted:
            mark(f"building a {args.pages:,}-page site")
            site = Site(args.pages, args.log_dir, service_cpus)
            report.site_pages = args.pages
            bench = Bench(
                site, redis, args.log_dir, crawl_cpus, service_cpus, settings=args.settings
            )
            small: Bench | None = None
            try:
                for phase in crawls_wanted:
                    if phase == "distance":
                        fresh = start_freshness("freshness, beside distance")
                        report.freshness_beside_distance = fresh is not None
                    mark(phase)
                    if phase not in ("plain", "worker") and small is None:
                        print(f"A second site, of {args.small_pages:,} pages", flush=True)
                        small = second_bench(bench, args.small_pages)
                        report.small_pages = args.small_pages
                    on = small or bench
                    if phase == "distance":
                        report.distance = distance_phase(
                            on,
                            args.distance_window,
                            args.distance_pairs,
                            tuple(int(n) for n in args.distance_workers.split(",")),
                        )
                        continue
                    if phase == "archive":
                        report.archive = archive_phase(on, args.archive_window, args.archive_pairs)
                        continue
                    if phase == "memory":
                        report.memory = memory_phase(on, args.setups_window)
                        print(summary_line(report.memory), flush=True)
                        continue
                    if phase == "jobs":
                        # The large site and 5,000 pages, as before: 2,000-page windows
                        # swung the ratios by more than the 5% they judge (BENCHMARKS.md).
                        report.jobs = jobs_phase(
                            bench,
                            args.jobs_window,
                            args.jobs_pairs,
                            [c for c in args.jobs_baseline.split(",") if c],
                        )
                        continue
                    if phase == "plain":
                        result = bench.plain_phase(args.window)
                    elif phase == "worker":
                        result = bench.windowed_worker(
                            "distributed, 1 worker", "worker", args.window
                        )
                    elif phase == "stock":
                        result = on.stock_phase(args.stock_window)
                    elif phase == "wait":
                        result = on.wait_phase(args.setups_window)
                    elif phase == "cluster":
                        # Its own site, of as many pages over several hosts (cluster.py).
                        report.cluster = cluster_phase(on, args.setups_window, on.site.pages)
                        result = report.cluster.crawl
                    else:
                        result = on.two_workers_phase(args.setups_window)
                    report.crawls[phase] = result
                    print(summary_line(result), flush=True)
            finally:
                site.stop()
                if small is not None:
                    small.site.stop()
        if fresh is None:
            fresh = start_freshness("freshness, beside")
        if "seen" not in skip:
            mark("seen-set")
            report.seen = seen_phase(redis)
        if "queue" not in skip:
            mark("queued requests")
            report.queue = queue_phase(redis)
        # Rendering's plain HTTP runs measure memory only: on CPU 1 while freshness ends.
        http: list[Run] | None = None
        if fresh is not None and "rendering" not in skip and args.render_http_pages:
            mark("plain HTTP runs of rendering")
            redis.reset()
            (args.log_dir / "rendering").mkdir(parents=True, exist_ok=True)
            http = http_runs(redis.url, args.render_http_pages, args.log_dir / "rendering")
            report.http_beside = True
        if fresh is not None:
            mark("waiting for freshness")
            report.freshness = fresh.result()
        if "writer" not in skip:
            mark("db_writer")
            redis.reset()
            report.writers = writer_phase(redis.url, args.writer_items)
            redis.reset()
            report.writers += pages_phase(redis.url, args.writer_items)
            for w in report.writers:
                print(f"  {w.database}: {w.items_per_s:,.0f} items/s {w.error}", flush=True)
        # Rendering runs unpinned: Chromium's processes take both cores.
        pin(os.getpid(), None)
        pin(redis.pid, None)
        if "freshness" not in skip and fresh is None:
            mark("freshness")
            report.freshness = freshness_phase(*freshness_args)
        if "rendering" not in skip:
            mark("rendering")
            redis.reset()
            report.rendering = rendering_phase(
                redis.url,
                args.log_dir / "rendering",
                pages=args.render_pages,
                http_pages=0 if http is not None else args.render_http_pages,
                every_variant=args.render_variants == "all",
            )
            if http is not None:
                report.rendering.http = http
    finally:
        redis.stop()
    report.seconds = time.monotonic() - t0
    ends = [start for _, start in marks[1:]] + [report.seconds]
    report.phases = {name: end - start for (name, start), end in zip(marks, ends, strict=True)}

    (args.log_dir / "results.json").write_text(json.dumps(results(report), indent=2, default=str))
    print()
    print(rep.render(report))
    if not args.no_write:
        rep.write(report)
        print(f"Written to {rep.BENCHMARKS.relative_to(rep.ROOT)}; logs in {args.log_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
