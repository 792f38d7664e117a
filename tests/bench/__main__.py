"""``make bench``: one runner, made of phases, with one report.

    python -m tests.bench [--pages 100000] [--window 20000] [--skip stock,two] [--no-write]

The frontier against plain Scrapy and stock scrapy-redis, side by side, then
the db_writer and rendering.

One run starts a private redis-server and a local site of ``--pages`` pages (a
process of its own), then, one after the other on that site:

1. plain Scrapy with the ``distributed`` spider's parse, its in-memory scheduler, no
   Redis (until ``--window`` pages);
2. one ``scrapy crawl distributed`` worker, which crawls the whole site: its first
   ``--window`` pages give throughput and cost, the end gives memory; then the same
   worker with a replica of Redis confirming its writes (WAIT), until ``--window``;
3. one worker on a Redis Cluster of three masters until ``--window`` pages
   (``cluster.py``), then stock scrapy-redis (its Scheduler, PriorityQueue,
   RFPDupeFilter, pickle, RedisPipeline, RedisSpider) until ``--stock-window`` pages;
4. two workers until ``--window`` pages; then distance (``distance.py``): one and two
   workers each 5 ms from Redis through a delay relay, against loopback, alternately,
   ``--distance-pairs`` pairs of ``--distance-window`` pages; then jobs (``jobs.py``):
   one worker with crawl jobs against a checkout of this commit with jobs switched
   off (``no_jobs.py``; ``--jobs-baseline`` may name commits), alternately,
   ``--jobs-pairs`` pairs of ``--jobs-window`` pages;
   then the archive (``archive.py``): one worker without and with ``WARC_ENABLED``,
   alternately, ``--archive-pairs`` pairs of ``--archive-window`` pages;
5. the seen-set: Redis bytes and CPU per seen URL, at 10^5 and 10^6 URLs, for the
   previous release's set of hex strings and each ``DUPEFILTER_MODE`` (``seen.py``),
   and Redis bytes per queued request, before and after (``queue_entries.py``);
6. the db_writer into SQLite and a temporary PostgreSQL (``--writer-items`` items);
   then freshness (``freshness.py``, about 5 minutes): adaptive against fixed revisits,
   two private setups side by side, time scaled (``--freshness-minute`` real seconds);
7. rendering (``tests/bench/rendering.py``): ``--render-pages`` rendered once per variant,
   then ``--render-http-pages`` over plain HTTP with three download handlers.

Redis and PostgreSQL come from ``tests/support/services.py``, the starters the
tests use. Results are printed and written to docs/BENCHMARKS.md by
``tests/bench/report.py`` (``--no-write``: printed only); logs and
``results.json`` go to ``--log-dir``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from pathlib import Path

from tests.bench import report as rep
from tests.bench.archive import archive_phase
from tests.bench.cluster import cluster_phase
from tests.bench.crawls import Bench, describe, summary_line
from tests.bench.db_writer import pages_phase, writer_phase
from tests.bench.distance import distance_phase
from tests.bench.freshness import freshness_phase
from tests.bench.jobs import BASELINE, jobs_phase
from tests.bench.queue_entries import queue_phase
from tests.bench.rendering import rendering_phase
from tests.bench.seen import seen_phase
from tests.bench.site_proc import Site
from tests.support.services import RedisServer, pin

PHASES = (
    "plain",
    "worker",
    "wait",
    "cluster",
    "stock",
    "two",
    "distance",
    "jobs",
    "archive",
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
    parser.add_argument("--pages", type=int, default=100_000, help="pages of the site")
    parser.add_argument("--window", type=int, default=20_000, help="pages per comparison")
    parser.add_argument(
        "--stock-window",
        type=int,
        default=10_000,
        help="pages of the stock scrapy-redis crawl (at about half the worker's speed, a "
        "full window would push make bench past 10 minutes)",
    )
    parser.add_argument("--distance-window", type=int, default=5_000)
    parser.add_argument("--distance-pairs", type=int, default=3, help="pairs of each setup")
    parser.add_argument("--distance-workers", default="1,2", help="the distance setups run")
    parser.add_argument("--jobs-window", type=int, default=5_000)
    parser.add_argument("--jobs-pairs", type=int, default=3, help="pairs with and without jobs")
    parser.add_argument(
        "--jobs-baseline",
        default=BASELINE,
        help="'stripped' (this commit with jobs switched off: tests/bench/no_jobs.py) or "
        "commit(s) without jobs, comma-separated (each checked out in a temporary git worktree)",
    )
    parser.add_argument("--archive-window", type=int, default=5_000)
    parser.add_argument("--archive-pairs", type=int, default=2, help="pairs without/with WARC")
    parser.add_argument("--writer-items", type=int, default=100_000)
    parser.add_argument("--freshness-minute", type=float, default=6.0, help="seconds a minute")
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
    # Sizes that keep rendering to about a minute and a half, and `make bench` near 10 minutes.
    parser.add_argument("--render-pages", type=int, default=100, help="rendered pages per run")
    parser.add_argument(
        "--render-http-pages", type=int, default=1000, help="pages of the plain HTTP runs (0: none)"
    )
    parser.add_argument("--no-write", action="store_true", help="do not touch BENCHMARKS.md")
    parser.add_argument("--log-dir", type=Path, default=Path("/tmp/bench"))
    args = parser.parse_args(argv)
    skip = {s for s in args.skip.split(",") if s}
    if skip - set(PHASES):
        parser.error(f"unknown phase(s) {sorted(skip - set(PHASES))}")
    if args.window > args.pages or ("stock" not in skip and args.stock_window > args.pages):
        parser.error("--window and --stock-window must not exceed --pages")
    if "archive" not in skip and args.archive_window > args.pages:
        parser.error("--archive-window must not exceed --pages")
    if "jobs" not in skip and args.jobs_window > args.pages:
        parser.error("--jobs-window must not exceed --pages")
    args.log_dir.mkdir(parents=True, exist_ok=True)
    command = " ".join(["python -m tests.bench", *(argv if argv is not None else sys.argv[1:])])
    report = rep.Report(command=command, started=rep.now(), window=args.window)
    t0 = time.monotonic()

    # Crawlers on CPU 0; the site, Redis and this process on CPU 1.
    pinned = (os.cpu_count() or 1) >= 2
    crawl_cpus = {0} if pinned else None
    service_cpus = {1} if pinned else None
    report.pinned = pinned
    if pinned:
        pin(os.getpid(), service_cpus)

    crawls = ("plain", "worker", "wait", "cluster", "stock", "two", "distance", "jobs", "archive")
    crawls_wanted = [p for p in crawls if p not in skip]
    redis = RedisServer(datadir=args.log_dir / "redis", cpus=service_cpus)
    try:
        if crawls_wanted:
            print(f"Building and serving a {args.pages:,}-page site ...", flush=True)
            site = Site(args.pages, args.log_dir, service_cpus)
            report.site_pages = args.pages
            bench = Bench(
                site, redis, args.log_dir, crawl_cpus, service_cpus, settings=args.settings
            )
            try:
                for phase in crawls_wanted:
                    print(f"== {phase} ({time.monotonic() - t0:.0f} s)", flush=True)
                    if phase == "distance":
                        report.distance = distance_phase(
                            bench,
                            args.distance_window,
                            args.distance_pairs,
                            tuple(int(n) for n in args.distance_workers.split(",")),
                        )
                        continue
                    if phase == "archive":
                        report.archive = archive_phase(
                            bench, args.archive_window, args.archive_pairs
                        )
                        continue
                    if phase == "jobs":
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
                        result = bench.worker_phase(args.window, 2 * args.pages)
                    elif phase == "stock":
                        result = bench.stock_phase(args.stock_window)
                    elif phase == "wait":
                        result = bench.wait_phase(args.window)
                    elif phase == "cluster":
                        report.cluster = cluster_phase(bench, args.window)
                        result = report.cluster.crawl
                    else:
                        result = bench.two_workers_phase(args.window)
                    report.crawls[phase] = result
                    print(summary_line(result), flush=True)
            finally:
                site.stop()
        if "seen" not in skip:
            print(f"== seen-set ({time.monotonic() - t0:.0f} s)", flush=True)
            report.seen = seen_phase(redis)
        if "queue" not in skip:
            print(f"== queued requests ({time.monotonic() - t0:.0f} s)", flush=True)
            report.queue = queue_phase(redis)
        if "writer" not in skip:
            print(f"== db_writer ({time.monotonic() - t0:.0f} s)", flush=True)
            redis.reset()
            report.writers = writer_phase(redis.url, args.writer_items)
            redis.reset()
            report.writers += pages_phase(redis.url, args.writer_items)
            for w in report.writers:
                print(f"  {w.database}: {w.items_per_s:,.0f} items/s {w.error}", flush=True)
        # Rendering runs unpinned: Chromium's processes take both cores.
        pin(os.getpid(), None)
        pin(redis.pid, None)
        if "freshness" not in skip:
            print(f"== freshness ({time.monotonic() - t0:.0f} s)", flush=True)
            report.freshness = freshness_phase(
                args.freshness_minute, 20, args.freshness_warm_up, 10.0, args.log_dir / "freshness"
            )
        if "rendering" not in skip:
            print(f"== rendering ({time.monotonic() - t0:.0f} s)", flush=True)
            redis.reset()
            report.rendering = rendering_phase(
                redis.url,
                args.log_dir / "rendering",
                pages=args.render_pages,
                http_pages=args.render_http_pages,
            )
    finally:
        redis.stop()
    report.seconds = time.monotonic() - t0

    (args.log_dir / "results.json").write_text(
        json.dumps(
            {
                "crawls": {k: describe(v) for k, v in report.crawls.items()},
                "writers": [w.__dict__ for w in report.writers],
                "seen": [s.__dict__ for s in report.seen],
                "queue": [q.__dict__ for q in report.queue],
                "cluster": (
                    {
                        "masters": report.cluster.masters,
                        "seen_bytes_per_url": report.cluster.seen_bytes_per_url,
                    }
                    if report.cluster
                    else None
                ),
                "distance": (
                    [
                        {"workers": p.workers, "ratio": p.ratio}
                        | {k: describe(getattr(p, k)) for k in ("loopback", "relay")}
                        for p in report.distance.pairs
                    ]
                    if report.distance
                    else None
                ),
                "jobs": (
                    {
                        "baselines": report.jobs.baselines,
                        "pairs": [
                            {"baseline": p.baseline, "job_pages": p.job_pages}
                            | {k: describe(getattr(p, k)) for k in ("with_jobs", "without")}
                            for p in report.jobs.pairs
                        ],
                    }
                    if report.jobs
                    else None
                ),
                "archive": (
                    [
                        {"warc_bytes": p.warc_bytes, "warc_files": p.warc_files}
                        | {k: describe(getattr(p, k)) for k in ("without", "with_warc")}
                        for p in report.archive.pairs
                    ]
                    if report.archive
                    else None
                ),
                "freshness": (
                    {
                        "ratios": [report.freshness.ratio(0), report.freshness.ratio(1)],
                        "windows": {
                            k: [dataclasses.asdict(w) for w in v]
                            for k, v in report.freshness.windows.items()
                        },
                    }
                    if report.freshness
                    else None
                ),
                "seconds": report.seconds,
                "rendering": dataclasses.asdict(report.rendering) if report.rendering else None,
            },
            indent=2,
            default=str,
        )
    )
    print()
    print(rep.render(report))
    if not args.no_write:
        rep.write(report)
        print(f"Written to {rep.BENCHMARKS.relative_to(rep.ROOT)}; logs in {args.log_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
