"""``make bench``: the frontier against plain Scrapy and stock scrapy-redis, side by side.

    python -m tests.bench [--pages 100000] [--window 20000] [--skip stock,two] [--no-write]

One run starts a private redis-server and a local site of ``--pages`` pages (a
process of its own), then, one after the other on that site:

1. plain Scrapy with the ``distributed`` spider's parse, its in-memory scheduler, no
   Redis (until ``--window`` pages);
2. one ``scrapy crawl distributed`` worker, which crawls the whole site: its first
   ``--window`` pages give throughput and cost, the end gives memory;
3. stock scrapy-redis (its Scheduler, PriorityQueue, RFPDupeFilter, pickle,
   RedisPipeline, RedisSpider) until ``--stock-window`` pages;
4. two workers until ``--window`` pages;
5. the db_writer into SQLite and a temporary PostgreSQL (``--writer-items`` items);
6. the rendering benchmark (``tests/bench/bench_rendering.py``, if present).

Results are printed and written to docs/BENCHMARKS.md (``--no-write``: printed
only); logs and ``results.json`` go to ``--log-dir``.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
import traceback
from pathlib import Path

from tests.bench import report as rep
from tests.bench.crawls import Bench, describe, summary_line
from tests.bench.db_writer import writer_phase
from tests.bench.services import RedisServer, Site, pin

PHASES = ("plain", "worker", "stock", "two", "writer", "rendering")
# Sizes that keep the rendering runs to about a minute and a half, so the whole of
# `make bench` stays under 10 minutes; run bench_rendering alone for its full sizes.
RENDERING_ARGS = "--pages 100 --http-pages 1000"


def rendering_hook(args: argparse.Namespace) -> str:
    """Run ``tests.bench.bench_rendering`` (another engineer's) if it exists.

    Its ``main(argv)`` prints its table and writes the ``## Rendering`` section
    of docs/BENCHMARKS.md itself; ``--rendering-args`` are passed through.
    """
    try:
        from tests.bench import bench_rendering
    except ImportError as exc:
        return f"skipped: tests.bench.bench_rendering not importable ({exc})"
    argv = shlex.split(args.rendering_args)
    if args.no_write:
        argv.append("--no-write")
    argv += ["--log-dir", str(args.log_dir / "rendering")]
    print(f"\n== Rendering: bench_rendering.main({argv})", flush=True)
    try:
        code = bench_rendering.main(argv)
    except SystemExit as exc:
        code = exc.code
    except Exception:
        traceback.print_exc()
        return "failed (traceback above)"
    return "done" if not code else f"exited {code}"


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
    parser.add_argument("--writer-items", type=int, default=100_000)
    parser.add_argument(
        "--set",
        dest="settings",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a Scrapy setting for every crawler (experiments; repeatable)",
    )
    parser.add_argument("--skip", default="", help=f"comma-separated, of {','.join(PHASES)}")
    parser.add_argument(
        "--rendering-args",
        default=RENDERING_ARGS,
        help=f"passed to bench_rendering (default: {RENDERING_ARGS!r})",
    )
    parser.add_argument("--no-write", action="store_true", help="do not touch BENCHMARKS.md")
    parser.add_argument("--log-dir", type=Path, default=Path("/tmp/bench"))
    args = parser.parse_args(argv)
    skip = {s for s in args.skip.split(",") if s}
    if skip - set(PHASES):
        parser.error(f"unknown phase(s) {sorted(skip - set(PHASES))}")
    if args.window > args.pages or ("stock" not in skip and args.stock_window > args.pages):
        parser.error("--window and --stock-window must not exceed --pages")
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

    crawls_wanted = [p for p in ("plain", "worker", "stock", "two") if p not in skip]
    redis = RedisServer(args.log_dir, service_cpus)
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
                    if phase == "plain":
                        result = bench.plain_phase(args.window)
                    elif phase == "worker":
                        result = bench.worker_phase(args.window, 2 * args.pages)
                    elif phase == "stock":
                        result = bench.stock_phase(args.stock_window)
                    else:
                        result = bench.two_workers_phase(args.window)
                    report.crawls[phase] = result
                    print(summary_line(result), flush=True)
            finally:
                site.stop()
        if "writer" not in skip:
            print(f"== db_writer ({time.monotonic() - t0:.0f} s)", flush=True)
            redis.reset()
            report.writers = writer_phase(redis.url, args.writer_items)
            for w in report.writers:
                print(f"  {w.database}: {w.items_per_s:,.0f} items/s {w.error}", flush=True)
    finally:
        redis.stop()
    pin(os.getpid(), None)

    if "rendering" not in skip:
        report.rendering = rendering_hook(args)
    report.seconds = time.monotonic() - t0

    (args.log_dir / "results.json").write_text(
        json.dumps(
            {
                "crawls": {k: describe(v) for k, v in report.crawls.items()},
                "writers": [w.__dict__ for w in report.writers],
                "seconds": report.seconds,
                "rendering": report.rendering,
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
