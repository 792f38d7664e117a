"""``python -m spiders_project.db_writer``: the process that stores items.

``--spider NAME`` (repeatable) writes those spiders' buffers; ``--all-spiders``
writes every spider whose workers buffered items (the set ``spiders``, looked
at again every DB_WRITER_SPIDERS_POLL seconds). Each spider has its own
writer thread and database connection; the threads share the process' one
Redis call path. Any number of these processes may run at once, on any
nodes: each writer takes its own batches (``item_queue.py``), and takes over
those of a writer that died. A writer thread that dies is fatal: the others
are stopped and the process exits 1 for its supervisor.

Exit status: 0 after a stop request (SIGTERM, SIGINT) or, with
``--exit-when-empty``, once nothing is left to write; 1 when Redis or the
database cannot be reached at start (one log line says which, password
masked), or when its Redis user may not run what it runs (one line naming
the command or key: ``acl_check.py``); 2 for a bad DB_URL or bad options. A second SIGTERM or SIGINT
kills the process at once (status 143 or 130 from the shell); the entries it
was writing stay in its processing list, and another writer (or the next
start) takes them over once its lease has expired.
"""

from __future__ import annotations

import argparse
import gc
import logging
import sys
from collections.abc import Sequence

import redis
from scrapy.settings import Settings

from spiders_project.db_writer.db_url import DbUrl, DbUrlError, parse_db_url
from spiders_project.db_writer.item_queue import ItemQueue
from spiders_project.db_writer.page_store import PageTable
from spiders_project.db_writer.pool import WriterPool
from spiders_project.db_writer.revisits import RevisitScheduler
from spiders_project.db_writer.sql_store import SqlStore, StoreUnavailable
from spiders_project.db_writer.stores import open_store
from spiders_project.db_writer.writer import ItemWriter, StopFlag, WriterConfig
from spiders_project.keys import SPIDERS, RedisKeys
from spiders_project.process import (
    command_line,
    exit_on_bad_config,
    ignore_stop_signals,
    on_stop_signals,
    redis_calls,
    start,
)
from spiders_project.recrawl.config import RecrawlConfig
from spiders_project.redis_access import SyncRedisCalls
from spiders_project.redis_access.acl import DB_WRITER
from spiders_project.redis_access.acl_check import permission_problem
from spiders_project.redis_access.connection import (
    RedisConfig,
    mask_url,
    ping_or_message,
    unreachable_message,
)
from spiders_project.redis_access.shards import spider_keys

logger = logging.getLogger("spiders_project.db_writer")

# Tracked objects allocated before the garbage collector's young generation is
# collected (Python's default: 700); see settle_garbage_collector.
GC_YOUNG_OBJECTS = 10_000


def _parser() -> argparse.ArgumentParser:
    parser = command_line(
        "python -m spiders_project.db_writer",
        "Move items from the Redis buffer <spider>:items into the database DB_URL.",
    )
    parser.add_argument(
        "--spider",
        dest="spiders",
        action="append",
        metavar="SPIDER",
        help="spider whose items to write; repeat for several (default: distributed)",
    )
    parser.add_argument(
        "--all-spiders",
        action="store_true",
        help="write the items of every spider whose workers buffered some",
    )
    parser.add_argument(
        "--exit-when-empty",
        "--once",
        dest="exit_when_empty",
        action="store_true",
        help="exit 0 once the buffer and the processing list are both empty",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args, settings = start("db_writer", _parser(), argv)
    if not args.spiders and not args.all_spiders:
        args.spiders = ["distributed"]
    args.spiders = list(dict.fromkeys(args.spiders or []))
    with exit_on_bad_config(logger, DbUrlError):
        db_url = parse_db_url(settings.get("DB_URL"))
        config = WriterConfig.from_settings(settings)
        recrawl = RecrawlConfig.from_settings(settings)
        redis_config = RedisConfig.from_settings(settings)
    message = ping_or_message(settings) or _user_problem(settings, args.spiders)
    if message is not None:
        logger.error("%s", message)
        return 1
    redis_url = mask_url(redis_config.url)
    # The call path's sleep between retries ends at a stop request, so a writer
    # waiting for Redis (away, or refusing writes) stops at the first signal.
    stop = StopFlag()
    calls = redis_calls(settings, logger, sleep=stop.sleep)
    pool = WriterPool(
        lambda spider: _writer(
            spider_keys(settings, spider),
            db_url,
            calls,
            config,
            recrawl,
            stop,
            args.exit_when_empty,
        )
    )
    try:
        open_store(db_url, "").close()  # the database answers, and its tables are ready
        settle_garbage_collector()
        for spider in args.spiders:
            pool.start(spider)
    except StoreUnavailable as exc:
        logger.error("cannot open the database %s: %s", db_url.redacted(), exc)
        return 1

    # Warm shutdown now; a second signal ends the process at once, even inside
    # a long database call. What it interrupts stays in the processing list
    # for the next start.
    on_stop_signals(pool.request_stop, second_kills=True)
    database = db_url.redacted()
    if db_url.path is not None and not db_url.path.is_absolute():
        database += f" ({db_url.path.resolve()})"
    logger.info(
        "connected: redis %s, database %s; writing %s in batches of up to %d items"
        " (waiting at most %.3gs to fill one)",
        redis_url,
        database,
        "every spider in the set " + SPIDERS if args.all_spiders else ", ".join(args.spiders),
        config.batch_size,
        config.max_wait,
    )
    discover = None
    if args.all_spiders:
        discover = lambda: _registered(calls)  # noqa: E731
    code = pool.run(discover, config.spiders_poll, args.exit_when_empty)
    ignore_stop_signals()
    return code


def settle_garbage_collector() -> None:
    """Keep the cyclic garbage collector off the writer's per-item work.

    A batch makes a dozen tracked objects per item (the decoded entry, the
    row), none of them in a cycle, so the default young generation (700
    objects) is collected about 70 times per 4,000-item batch, and each tenth
    and hundredth collection also walks the process' 80,000 objects of
    start-up (Scrapy, the drivers). That was 1.1 µs of an item's 4-5 µs of
    parsing (docs/BENCHMARKS.md, "The db_writer's cost per item"). Start-up's
    objects are frozen out of every collection, and the young generation
    holds GC_YOUNG_OBJECTS before one.
    """
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(GC_YOUNG_OBJECTS, older, oldest)


def _writer(
    keys: RedisKeys,
    db_url: DbUrl,
    calls: SyncRedisCalls,
    config: WriterConfig,
    recrawl: RecrawlConfig,
    stop: StopFlag,
    exit_when_empty: bool,
) -> ItemWriter:
    """The writer of one spider, with its own database connection."""
    store = open_store(db_url, keys.spider)
    queue = ItemQueue(calls, keys, config.lock_ttl)
    pages = PageTable(store, recrawl) if isinstance(store, SqlStore) else None
    revisits = None
    if pages is not None and recrawl.revisits:
        revisits = RevisitScheduler(pages, calls, keys, recrawl)
    return ItemWriter(
        queue,
        store,
        config,
        stop=stop,
        exit_when_empty=exit_when_empty,
        store_name=db_url.redacted(),
        pages=pages,
        revisits=revisits,
    )


def _user_problem(settings: Settings, spiders: list[str]) -> str | None:
    """The line saying what REDIS_URL's user lacks of the db_writer's needs (acl_check.py)."""
    cluster = RedisConfig.from_settings(settings).cluster
    keys = [RedisKeys(spider, cluster=cluster) for spider in spiders]
    try:
        return permission_problem(settings, DB_WRITER.name, keys)
    except (redis.RedisError, OSError) as exc:
        return unreachable_message(settings, exc)


def _registered(calls: SyncRedisCalls) -> list[str]:
    """The spiders whose workers buffered items, sorted."""
    names = calls.command("SMEMBERS", SPIDERS, writes=False)
    return sorted(name.decode("utf-8", "replace") for name in names)


if __name__ == "__main__":
    sys.exit(main())
