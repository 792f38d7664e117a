"""Throughput of the db_writer: push N items, time the drain into DB_URL.

    python -m spiders_project.db_writer.bench -n 100000 \\
        --redis-url redis://127.0.0.1:6379/15 --db-url sqlite:////tmp/bench.db

Runs the real process (``python -m spiders_project.db_writer --exit-when-empty``)
against the given Redis and database. It deletes the bench spider's keys in
that Redis and its rows in the database first, so point it at a scratch
Redis database, never at a production one.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime

import redis

from spiders_project.db_writer.db_url import SQLITE, parse_db_url
from spiders_project.keys import RedisKeys

SPIDER = "dbwriterbench"


def make_item(i: int) -> bytes:
    """An item shaped like the spider's (about 400 bytes of JSON)."""
    return json.dumps(
        {
            "url": f"http://bench.example/page/{i}",
            "status": 200,
            "title": f"Page {i} of the bench site",
            "fetched_at": datetime.now(UTC).isoformat(),
            "depth": i % 7,
            "links": [f"http://bench.example/page/{i + k}" for k in range(1, 4)],
            "text": "lorem ipsum dolor sit amet " * 8,
        }
    ).encode()


def clear_database(db_url: str) -> None:
    parsed = parse_db_url(db_url)
    if parsed.backend == SQLITE:
        assert parsed.path is not None
        for suffix in ("", "-wal", "-shm"):
            path = f"{parsed.path}{suffix}"
            if os.path.exists(path):
                os.remove(path)
        return
    import psycopg

    with psycopg.connect(parsed.conninfo or "", autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS items")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=100_000, help="items to push")
    parser.add_argument("--redis-url", required=True)
    parser.add_argument("--db-url", required=True)
    parser.add_argument("--batch-size", type=int, default=None, help="DB_WRITER_BATCH_SIZE")
    args = parser.parse_args()

    keys = RedisKeys(SPIDER)
    client = redis.Redis.from_url(args.redis_url)
    client.delete(keys.items, keys.items_processing, keys.items_rejected, keys.db_writer_stats)
    clear_database(args.db_url)
    pipe = client.pipeline(transaction=False)
    chunk = [make_item(i) for i in range(1000)]
    for start in range(0, args.n, 1000):
        # Distinct urls, same size: only the url changes between chunks.
        pipe.rpush(keys.items, *(c.replace(b"/page/", f"/p{start}/".encode(), 1) for c in chunk))
    pipe.execute()

    env = dict(os.environ, REDIS_URL=args.redis_url, DB_URL=args.db_url)
    command = [sys.executable, "-m", "spiders_project.db_writer", "--spider", SPIDER]
    command += ["--exit-when-empty", "-s", "DB_WRITER_MAX_WAIT=0"]
    if args.batch_size:
        command += ["-s", f"DB_WRITER_BATCH_SIZE={args.batch_size}"]
    started = time.perf_counter()
    process = subprocess.Popen(command, env=env)
    first_batch_at = None  # the writer's start-up (imports, connects) is not throughput
    while process.poll() is None:
        if first_batch_at is None and client.hget(keys.db_writer_stats, "batches"):
            first_batch_at = time.perf_counter()
        time.sleep(0.02)
    elapsed = time.perf_counter() - started
    steady = time.perf_counter() - (first_batch_at or started)
    written = int(client.hget(keys.db_writer_stats, "items_written") or 0)
    print(
        f"{written} items -> {parse_db_url(args.db_url).redacted()}: "
        f"{written / steady:,.0f} items/s from the first batch on ({steady:.2f} s); "
        f"{written / elapsed:,.0f} items/s with process start-up ({elapsed:.2f} s); "
        f"exit {process.returncode}"
    )
    return process.returncode


if __name__ == "__main__":
    sys.exit(main())
