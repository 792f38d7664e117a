"""``python -m spiders_project.demo`` (``make demo``): a whole crawl of the bundled site.

It serves the demo site (``site.SiteServer``: 300 pages, every 7th page
answers 503 once, 5 ms per response) from a thread, runs 2 workers, the
db_writer and, once ``monitor`` exists, the exporter under a real supervisord
configured from ``deploy/supervisor/crawler.conf``, pushes the site's root to
``distributed:start_urls``, and prints a progress line every 2 s. The workers
run as in production (they never exit on their own); the demo decides the
crawl is over when seeds, queue, leases, item buffer and the db_writer's
processing list have stayed empty for 2 s. It then stops the programs with
``supervisorctl stop all`` (graceful), shuts supervisord down and prints a
summary.

Which Redis:

- ``REDIS_URL`` set: that server, as given.
- unset, and a Redis answers on localhost:6379: that one (the settings' default).
- unset, and nothing answers there: a private ``redis-server`` on a free port,
  without persistence, stopped at the end.

A server the demo did not start may be shared, so the demo refuses it (exit
2) when any ``distributed:*`` key already exists there; ``--reset`` deletes
those keys (and only those) first. At the end the demo deletes the
``distributed:*`` keys it created there, unless ``--keep-keys``. Workers of
another crawl connected to that server would take the demo's seed: use a
server of your own then.

Which database: ``DB_URL`` if set (a relative sqlite path is relative to the
repository, the programs' working directory), refused (exit 2) if its
``items`` table already holds rows; otherwise ``sqlite:///data/demo-items.db``,
deleted at start so that "every page exactly once" can be checked.

Exit status: 0 when every page of the site is in the database exactly once
and no other row is; 1 when not, on a timeout (``--timeout``, 300 s) or when
a program keeps failing; 2 when refused (see above, or bad options); 128+N
after signal N (Ctrl-C, SIGTERM). On every path it stops everything it
started: supervisord and its programs, the private Redis, the site.
Logs stay in ``run/demo/`` (``--run-dir``).
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import importlib.util
import shutil
import signal
import sqlite3
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import psycopg
import redis

from spiders_project.commands.crawl import check_worker_settings
from spiders_project.config import ConfigError, load_settings
from spiders_project.db_writer.writer import WriterConfig
from spiders_project.demo.items_table import ItemsTable, prepare_db
from spiders_project.demo.output import DemoError, say, tail
from spiders_project.demo.redis_server import (
    K,
    choose_redis,
    claim_namespace,
    forget_crawl,
    free_port,
)
from spiders_project.demo.site import SiteServer
from spiders_project.demo.supervisor import ROOT, Supervisor, render_config
from spiders_project.process import command_line, on_stop_signals
from spiders_project.read_model.contract import Work, work_of, work_reads
from spiders_project.redis_access.connection import mask_url, sync_client

# The crawl is over once every queue has stayed empty and nothing changed this long.
SETTLE_SECONDS = 2.0
PROGRESS_EVERY = 2.0
POLL_EVERY = 0.25
# Programs whose failure fails the demo; the monitor only gets a warning.
ESSENTIAL = ("worker", "db_writer")


class Interrupted(BaseException):
    """SIGINT or SIGTERM: stop everything, then exit 128 + signal."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _interrupt(signum: int) -> None:
    raise Interrupted(signum)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = command_line(
        "python -m spiders_project.demo",
        "A 2-worker crawl of the bundled demo site under supervisord.",
        settings_option=False,
    )
    parser.add_argument(
        "--reset",
        action="store_true",
        help="delete existing distributed:* keys of a Redis the demo did not start",
    )
    parser.add_argument(
        "--keep-keys",
        action="store_true",
        help="leave the crawl's distributed:* keys in that Redis at the end",
    )
    parser.add_argument("--pages", type=int, default=300, help="pages of the site (%(default)s)")
    parser.add_argument("--workers", type=int, default=2, help="worker processes (%(default)s)")
    parser.add_argument(
        "--timeout", type=float, default=300.0, help="give up after this many seconds (%(default)s)"
    )
    parser.add_argument(
        "--run-dir",
        type=Path,
        default=ROOT / "run" / "demo",
        help="supervisord config, socket and logs (%(default)s)",
    )
    args = parser.parse_args(argv)
    if args.pages < 1 or args.workers < 1 or args.timeout <= 0:
        parser.error("--pages, --workers and --timeout must be positive")
    return args


# --- The crawl -----------------------------------------------------------------------


def monitor_available() -> bool:
    """True once this repository has a ``monitor`` package with a ``__main__``."""
    try:
        spec = importlib.util.find_spec("monitor.__main__")
    except (ImportError, ValueError):
        return False
    return spec is not None and spec.origin is not None and Path(spec.origin).is_relative_to(ROOT)


def read_work(client: redis.Redis) -> Work:
    """Everything in Redis that is not finished yet (``contract.Work``)."""
    with client.pipeline(transaction=False) as pipe:
        for command in work_reads(K):
            pipe.execute_command(*command)
        return work_of(pipe.execute(), K)


def check_programs(supervisor: Supervisor, warned: set[str]) -> None:
    """Fail when a worker or the db_writer gave up restarting; warn once about the others."""
    for info in supervisor.processes():
        if info["statename"] != "FATAL":
            continue
        name = f"{info['group']}:{info['name']}"
        log = tail(Path(info["stdout_logfile"]))
        if info["name"].startswith(ESSENTIAL):
            reason = info["spawnerr"] or "it kept exiting"
            raise DemoError(f"{name} failed to start ({reason}); its log:\n{log}")
        if name not in warned:
            warned.add(name)
            say(f"warning: {name} failed to start; the crawl goes on without it. Its log:\n{log}")


def wait_for_crawl(
    client: redis.Redis,
    table: ItemsTable,
    site: SiteServer,
    supervisor: Supervisor,
    deadline: float,
    started: float,
) -> float:
    """Wait until the crawl is over and return when it was (monotonic time)."""
    pages = site.page_urls()
    last_state: tuple[Work, int] | None = None
    changed_at = time.monotonic()
    next_progress = changed_at + PROGRESS_EVERY
    warned: set[str] = set()
    while True:
        now = time.monotonic()
        frontier = read_work(client)
        stored = table.count()
        state = (frontier, stored)
        if state != last_state:
            last_state, changed_at = state, now
        elif frontier.drained and now - changed_at >= SETTLE_SECONDS:
            return changed_at
        if now >= next_progress:
            next_progress += PROGRESS_EVERY
            crawled = len(pages.intersection(site.hits()))
            say(
                f"[{now - started:5.1f}s] pages crawled {crawled}/{len(pages)} | "
                f"items in DB {stored} | queue {frontier.queued} | leased {frontier.leased} | "
                f"item buffer {frontier.items + frontier.processing}"
            )
            check_programs(supervisor, warned)
        if now >= deadline:
            raise DemoError(
                f"timed out: the crawl was not over after {now - started:.0f} s "
                f"({stored}/{len(pages)} pages in the database, {frontier}); "
                f"logs in {supervisor.run_dir / 'logs'}"
            )
        time.sleep(POLL_EVERY)


def verify(table: ItemsTable, site: SiteServer) -> tuple[bool, str]:
    """Whether every page is in the database exactly once and nothing else is; and a line."""
    pages = site.page_urls()
    urls = table.urls()
    stored = set(urls)
    missing, extra = pages - stored, stored - pages
    duplicates = len(urls) - len(stored)
    if not (missing or extra or duplicates):
        return True, f"OK: all {len(pages)} pages of the demo site are in the database exactly once"
    detail = [
        f"{len(missing)} pages missing",
        f"{len(extra)} rows that are not pages",
        f"{duplicates} duplicate rows",
    ]
    examples = sorted(missing)[:3] + sorted(extra)[:3]
    return False, f"FAILED: {', '.join(detail)} (e.g. {', '.join(examples) or '-'})"


def start_programs(
    args: argparse.Namespace, run_dir: Path, redis_url: str, db_url: str
) -> tuple[Supervisor, str]:
    """supervisord from the production config, and a line naming what it runs."""
    env_lines = {"REDIS_URL": redis_url, "DB_URL": db_url}
    with_monitor = monitor_available()
    if with_monitor:
        env_lines |= {"MONITOR_HOST": "127.0.0.1", "MONITOR_PORT": str(free_port())}
    env_file = run_dir / "crawler.env"
    env_file.write_text("".join(f"{k}={_shell_quote(v)}\n" for k, v in env_lines.items()))
    env_file.chmod(0o600)
    supervisord_env = {
        "CRAWLER_HOME": str(ROOT),
        "CRAWLER_ENV_FILE": str(env_file),
        "CRAWLER_LOG_DIR": str(run_dir / "logs"),
        "CRAWLER_WORKERS": str(args.workers),
        "CRAWLER_RENDER_WORKERS": "0",  # the demo's workers render themselves
    }
    config = render_config(run_dir, environment=supervisord_env, with_monitor=with_monitor)
    supervisor = Supervisor(run_dir, config)
    programs = f"{args.workers} workers, the db_writer"
    if with_monitor:
        programs += f", the monitor (http://127.0.0.1:{env_lines['MONITOR_PORT']}/metrics)"
    return supervisor, programs


def report(
    args: argparse.Namespace, table: ItemsTable, site: SiteServer, seconds: float, started: float
) -> int:
    """Print the summary; 0 if every page is in the database exactly once, else 1."""
    ok, verdict = verify(table, site)
    hits = site.hits()
    pages = site.page_urls()
    crawled = len(pages.intersection(hits))
    retried = site.statuses()[503]
    twice = sum(1 for url in pages if hits[url] > 1)
    say(
        f"pages crawled: {crawled} of {len(pages)} in {seconds:.1f} s "
        f"({crawled / seconds:.1f} pages/s with {args.workers} workers); "
        f"{retried} answered 503 first and were retried; {twice} fetched more than once"
    )
    where = table.location
    if table.path is not None:
        where += f" (DB_URL {table.db.url})"
    say(f"items in the database: {table.count()} in {where}")
    total = time.monotonic() - started
    say(f"logs: {args.run_dir.resolve() / 'logs'}; total run time {total:.1f} s")
    say(verdict)
    return 0 if ok else 1


def run(args: argparse.Namespace, stack: contextlib.ExitStack) -> int:
    started = time.monotonic()
    run_dir: Path = args.run_dir.resolve()
    shutil.rmtree(run_dir / "logs", ignore_errors=True)
    run_dir.mkdir(parents=True, exist_ok=True)
    scrapy_bin = ROOT / ".venv" / "bin" / "scrapy"
    if not scrapy_bin.exists():
        raise DemoError(f"{scrapy_bin} not found: run `make setup`")

    try:
        # The programs read the same settings: fail here, on one line.
        settings = load_settings()
        check_worker_settings(settings)
        WriterConfig.from_settings(settings)
    except ConfigError as exc:
        raise DemoError(f"bad setting: {exc}", status=2) from exc
    redis_url, own_redis = choose_redis(stack, run_dir)
    client = sync_client(load_settings({"REDIS_URL": redis_url}))
    stack.callback(client.close)
    try:
        client.ping()
        if not own_redis:
            claim_namespace(client, redis_url, args.reset)
    except redis.RedisError as exc:
        raise DemoError(f"cannot use Redis at {mask_url(redis_url)}: {exc}") from exc
    if not own_redis and not args.keep_keys:
        stack.callback(forget_crawl, client, redis_url)
    db_url, table = prepare_db()
    origin = "private, started by the demo" if own_redis else "existing"
    say(f"redis {mask_url(redis_url)} ({origin}), database {table.db.redacted()}")

    site = SiteServer(args.pages, flaky_every=7, latency=0.005).start()
    stack.callback(site.stop)
    say(f"serving {len(site.page_urls())} pages at {site.url}")
    supervisor, programs = start_programs(args, run_dir, redis_url, db_url)
    stack.callback(supervisor.stop)
    supervisor.start()
    say(f"supervisord is running {programs} (config {supervisor.conf_path})")

    try:
        client.lpush(K.start_urls, site.url)
        seeded = time.monotonic()
        say(f"seeded: LPUSH {K.start_urls} {site.url}")
        done = wait_for_crawl(client, table, site, supervisor, started + args.timeout, started)
        say("crawl over; stopping the programs (supervisorctl stop all) and supervisord")
        supervisor.stop()
        return report(args, table, site, max(done - seeded, 1e-3), started)
    except (redis.RedisError, sqlite3.Error, psycopg.Error) as exc:
        raise DemoError(f"the crawl could not be followed: {type(exc).__name__}: {exc}") from exc


def _shell_quote(value: str) -> str:
    """``value`` as a bash word that systemd's EnvironmentFile= reads the same way."""
    return "'" + value.replace("'", "'\\''") + "'"


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    on_stop_signals(_interrupt)
    stack = contextlib.ExitStack()
    atexit.register(stack.close)  # a no-op unless the finally below was skipped
    status = 1
    try:
        status = run(args, stack)
    except DemoError as exc:
        say(f"error: {exc}")
        status = exc.status
    except Interrupted as exc:
        say(
            f"{signal.Signals(exc.signum).name}: stopping everything the demo started "
            "(again to kill it all at once)"
        )
        status = 128 + exc.signum
    finally:
        try:
            stack.close()
        except Interrupted as exc:  # a second signal: the cleanups killed what was left
            status = 128 + exc.signum
    return status


if __name__ == "__main__":
    sys.exit(main())
