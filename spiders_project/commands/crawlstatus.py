"""``scrapy crawlstatus``: the crawl's state in the terminal, refreshed every few seconds.

Shows, per spider, what the Prometheus exporter exposes: queue sizes, pages/s
over the last minute, the ETA of the requests queued now at that rate, and
every listed worker with the age of its last heartbeat. Examples::

    scrapy crawlstatus                 # live view, every 2 s, until Ctrl-C
    scrapy crawlstatus --once          # print once and exit
    scrapy crawlstatus --once --json   # the same numbers as one JSON document
    scrapy crawlstatus --interval 5 --window 120 --spider distributed
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import time
from datetime import UTC, datetime

import redis
from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from spiders_project.commands.redis_command import RedisCommand
from spiders_project.config import SettingsReader
from spiders_project.read_model.cluster_view import (
    ClusterView,
    SpiderView,
    as_dict,
    eta_seconds,
    pages_per_second,
    read_cluster,
)
from spiders_project.read_model.contract import ERRORS, ITEMS, PAGES, QUEUES
from spiders_project.read_model.job_progress import summary
from spiders_project.redis_access import RedisUnavailable
from spiders_project.redis_access.shards import masters_memory_reader, shard_keys_reader
from spiders_project.worker.heartbeat import StatsPublishConfig

DEFAULT_INTERVAL = 2.0
DEFAULT_WINDOW = 60.0
# Running jobs shown one line each (scrapy jobs list shows them all).
JOBS_SHOWN = 20
_CLEAR = "\x1b[H\x1b[2J"


class Command(RedisCommand, ScrapyCommand):
    """Operator's live view of the crawl; needs only Redis, never starts a crawl."""

    def syntax(self) -> str:
        return "[--once] [--json] [--interval S] [--window S] [--spider NAME]..."

    def short_desc(self) -> str:
        return "Live view of queues, pages/s, ETA and workers (from Redis)"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument(
            "--spider",
            action="append",
            default=[],
            help="spider to show (repeatable; default: MONITOR_SPIDERS)",
        )
        parser.add_argument("--once", action="store_true", help="print once and exit")
        parser.add_argument("--json", action="store_true", help="with --once: one JSON document")
        parser.add_argument(
            "--interval",
            type=float,
            default=DEFAULT_INTERVAL,
            metavar="S",
            help=f"seconds between refreshes (default {DEFAULT_INTERVAL:g})",
        )
        parser.add_argument(
            "--window",
            type=float,
            default=DEFAULT_WINDOW,
            metavar="S",
            help=f"pages/s over the last S seconds (default {DEFAULT_WINDOW:g})",
        )

    def process_options(self, args: list[str], opts: argparse.Namespace) -> None:
        super().process_options(args, opts)
        assert self.settings is not None
        if args:
            raise UsageError("crawlstatus takes no arguments")
        if opts.interval <= 0 or opts.window <= 0:
            raise UsageError("--interval and --window must be positive", print_help=False)
        if opts.json and not opts.once:
            raise UsageError("--json needs --once", print_help=False)
        with self.config_errors():
            kept = StatsPublishConfig.from_settings(self.settings).samples_retention
        if opts.window > kept:
            raise UsageError(
                f"--window can be at most STATS_SAMPLES_RETENTION ({kept:g} s)", print_help=False
            )

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        assert self.settings is not None
        with self.config_errors():
            read = SettingsReader(self.settings)
            names = opts.spider or read.getlist("MONITOR_SPIDERS")
            spiders = list(dict.fromkeys(s.strip() for s in names if s.strip()))
            read.check(bool(spiders), "MONITOR_SPIDERS", "names no spider (or give --spider)")
            retention = StatsPublishConfig.from_settings(self.settings).worker_retention
            calls = self.redis_calls()
            keys_of = shard_keys_reader(self.settings, calls)
            masters_memory = masters_memory_reader(self.settings, calls)
            url = self.redis_url()
        client = calls.client
        live = not opts.once
        clear = live and sys.stdout.isatty()
        try:
            while True:
                try:
                    send = functools.partial(calls.pipelined, retry=False)
                    view = read_cluster(
                        send,
                        spiders,
                        worker_retention=retention,
                        samples=True,
                        keys_of=keys_of,
                        masters_memory=masters_memory,
                    )
                except (RedisUnavailable, redis.RedisError) as exc:
                    # Unreachable, loading or busy (its cause), or an error
                    # reply such as WRONGTYPE on a broken key (with its command).
                    cause = exc.cause if isinstance(exc, RedisUnavailable) else exc
                    message = f"cannot read Redis at {url}: {type(cause).__name__}: {cause}"
                    if not live:
                        self.fail(message)
                        return
                    retrying = f"retrying every {opts.interval:g} s"
                    text = f"{_CLEAR if clear else ''}{message} ({retrying})"
                else:
                    if opts.json:
                        print(json.dumps(as_dict(view)))
                        return
                    text = (_CLEAR if clear else "") + render(view, url, opts.window)
                print(text, flush=True)
                if not live:
                    return
                time.sleep(opts.interval)
                if not clear:
                    print()
        except KeyboardInterrupt:
            pass
        finally:
            client.close()


def render(view: ClusterView, url: str, window: float) -> str:
    """The whole status screen, as text."""
    at = datetime.fromtimestamp(view.time, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    memory = f"{_size(view.used_memory)} used"
    if view.maxmemory:
        memory += f" of {_size(view.maxmemory)}"
    lines = [f"crawl status at {at}; Redis {url}, {memory}"]
    for spider in view.spiders:
        lines += _spider_lines(spider, view.time, window)
    return "\n".join(lines)


def _spider_lines(view: SpiderView, now: float, window: float) -> list[str]:
    queues = " | ".join(f"{q} {view.queues[q]:,}" for q in QUEUES)
    measured = pages_per_second(view, now, window)
    rate = measured[0] if measured else None
    eta = eta_seconds(view, rate)
    work = view.queues["requests"] + view.queues["leases"]
    if measured is None:
        rate_text = "unknown pages/s (no samples yet)"
    else:
        rate_text = f"{measured[0]:,.1f} pages/s over the last {measured[1]:.0f} s"
    if work == 0:
        eta_text = "nothing queued"
    elif eta is None:
        eta_text = f"unknown for {work:,} queued and leased requests (no recent pages)"
    else:
        eta_text = f"{_duration(eta)} for {work:,} queued and leased requests at this rate"
    errors = sum(v for k, v in view.totals.items() if k.startswith(ERRORS))
    lag = "unknown" if view.lag is None else f"{view.lag:,.1f} s"
    written = int(view.db_writer.get("items_written", 0))
    lines = [
        "",
        f"spider {view.spider}",
        f"  queues      {queues}",
        f"  dupefilter  {view.dupefilter:,} fingerprints",
        f"  throughput  {rate_text}; "
        f"{view.totals.get(PAGES, 0):,} pages, {view.totals.get(ITEMS, 0):,} items, "
        f"{errors:,} errors in all",
        f"  ETA         {eta_text}",
        f"  db_writer   {written:,} items written; lag {lag}",
        f"  workers     {view.workers_alive} alive, {len(view.workers) - view.workers_alive} lost",
    ]
    lines[-1:-1] = _steered_lines(view)
    running = [job for job in view.jobs if job.state in ("running", "paused")]
    lines[-1:-1] = [f"  job         {summary(job)}" for job in running[:JOBS_SHOWN]]
    for w in sorted(view.workers, key=lambda w: w.worker):
        state = "alive" if w.alive else "LOST "
        lines.append(
            f"    {w.worker:<28} {state}  last seen {max(0.0, now - w.last_seen):6.1f} s ago  "
            f"pages {w.counters.get(PAGES, 0):,}  items {w.counters.get(ITEMS, 0):,}"
        )
    return lines


# Steered hosts named one by one; more are counted (scrapy frontier host --show each).
STEERED_SHOWN = 10


def _steered_lines(view: SpiderView) -> list[str]:
    """The hosts an operator steers (scrapy frontier host), blocked ones first."""
    if not view.steered:
        return []
    order = sorted(view.steered.items(), key=lambda item: (not item[1].blocked, item[0]))
    lines = [f"  hosts       {len(view.steered)} steered, {view.hosts_blocked} blocked"]
    for host, steer in order[:STEERED_SHOWN]:
        what = ["BLOCKED"] if steer.blocked else []
        what += [f"delay {steer.delay:g} s"] if steer.delay is not None else []
        what += [f"cap {steer.cap}"] if steer.cap is not None else []
        lines.append(f"    {host:<40} {', '.join(what)}")
    if len(order) > STEERED_SHOWN:
        lines.append(f"    ... and {len(order) - STEERED_SHOWN} more")
    return lines


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m"
    if minutes:
        return f"{minutes}m {secs:02d}s"
    return f"{secs}s"


def _size(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:,.1f} {unit}"
        size /= 1024
    return f"{size:,.1f} GiB"
