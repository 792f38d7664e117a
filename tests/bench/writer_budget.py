"""Where the db_writer's CPU goes per item, in every process, against issue 42's targets.

    python -m tests.bench.writer_budget [--items 200000] [--rounds 2] [--entries json|raw]

Issue 42, item 6: at most 16 µs of CPU per item into PostgreSQL and 9 µs into
SQLite, the writer, Redis and the database server together, however the work
is spread (about 125,000 and 220,000 items/s on two cores). This tool
measures each share while the real db_writer drains ``--items`` items
(``db_writer.measured_drain``, the drain that ``make bench`` and
``bench-quick`` time and hold to the same targets):

- the writer: the process' own CPU (its children's rusage) less what a run with
  no items costs (imports, connects, creating the table), per item;
- Redis: its ``INFO cpu`` over the drain (the buffer's filling left out), per item;
- PostgreSQL: every process of its cluster, the postmaster's reaped backends
  included, over the drain, per item.

It also measures PostgreSQL's floor: its backend's CPU for ``COPY`` of rows made
beforehand into the items table, with the table as the writer creates it and two
lighter shapes for reference (``data`` as text, no primary key). The writer's
guarantees need the real one: JSONB ``data`` and the key that newer-wins upserts on.

And the writer's own CPU per item, step by step (take, parse, dedupe, write,
ack), its batch loop run in this process (``writer_stages``).

``--entries raw`` fills the buffer with entries of the header-and-item format
(``keys/item_entries.py``) instead of the JSON ones workers write.

And what Redis spends per item on the writer's take and ack (``db_writer/lua``:
take.lua copies each entry into the processing list, the writer reads them
there with LRANGE) against reading a batch in place (a MULTI of the writer's
HEXISTS and an LRANGE of the buffer's head) and trimming it at the ack, as a
lone writer without a processing list could.
"""

from __future__ import annotations

import argparse
import logging
import re
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import psutil
import psycopg
import redis

from spiders_project.db_writer.__main__ import settle_garbage_collector
from spiders_project.db_writer.db_url import parse_db_url
from spiders_project.db_writer.entries import dedupe, parse_entries
from spiders_project.db_writer.item_queue import LUA_DIR, ItemQueue
from spiders_project.db_writer.sql_store import COLUMNS
from spiders_project.db_writer.stores import PostgresStore, _JsonbText, _JsonText, open_store
from spiders_project.keys import RedisKeys
from spiders_project.redis_access import SyncRedisCalls, load_lua
from spiders_project.redis_access.state import RedisState
from tests.bench.db_writer import (
    TARGET_WRITER_US,
    WriterResult,
    clear_buffer,
    clear_database,
    cpu_of,
    distinct_chunks,
    fill_buffer,
    make_item,
    make_raw_item,
    measured_drain,
    postgres_cpu,
)
from tests.bench.seen import redis_cpu
from tests.support.services import PostgresServer, RedisServer


def postgres_floor(pg: PostgresServer, items: int) -> dict[str, float]:
    """The backend's CPU µs per row of ``COPY`` into tables of three shapes, in the
    binary format the writer sends (``PostgresStore._insert``)."""
    rows = []
    for chunk in distinct_chunks(make_item, items):
        rows += parse_entries(chunk)[0]
    base = PostgresStore.CREATE.format(table="{table}", **PostgresStore.TYPES)
    shapes = {
        "the items table (JSONB data, primary key)": base,
        "data as TEXT": base.replace("data JSONB", "data TEXT"),
        "no primary key": re.sub(r",\s*PRIMARY KEY \([^)]*\)", "", base),
    }
    assert len(set(shapes.values())) == 3, "the table's shape changed: update the variants"
    out = {}
    with psycopg.connect(pg.url, autocommit=True) as conn:
        pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]  # type: ignore[index]
        backend = psutil.Process(pid)
        for i, (name, create) in enumerate(shapes.items()):
            table = f"floor_{i}"
            conn.execute(create.format(table=table))
            copy_into = PostgresStore.COPY_INTO.format(table=table, columns=COLUMNS)
            types = list(PostgresStore.COPY_TYPES)
            types[4] = "text" if "data TEXT" in create else types[4]
            before = cpu_of(backend, reaped=False)
            for start in range(0, len(rows), 4000):
                cursor = conn.cursor()
                cursor.adapters.register_dumper(_JsonText, _JsonbText)
                with conn.transaction(), cursor.copy(copy_into) as copy:
                    copy.set_types(types)
                    now = datetime.now(UTC)
                    for r in rows[start : start + 4000]:
                        at = datetime.fromisoformat(r[5])
                        copy.write_row(("bench", r[1], r[2], r[3], r[4], at, now))
            out[name] = (cpu_of(backend, reaped=False) - before) / len(rows) * 1e6
            conn.execute(f"DROP TABLE {table}")
    return out


def take_paths(redis_url: str, items: int, batch: int = 4000) -> dict[str, float]:
    """Redis' CPU µs per item to take and acknowledge ``items`` in batches, two ways."""
    client = redis.Redis.from_url(redis_url)
    take = client.register_script(load_lua(LUA_DIR, "take").source)
    ack = client.register_script(load_lua(LUA_DIR, "ack").source)
    keys = ["budget:items", "budget:processing", "budget:rejected", "budget:stats"]
    keys += ["budget:writers", "budget:lease", "budget:filling"]
    items_key, processing, rejected, stats, writers, lease, filling = keys

    def fill() -> None:
        client.delete(*keys)
        client.hset(writers, "token", 0)  # the one writer (item_queue.ItemQueue.join)
        fill_buffer(client, items_key, make_item, items)

    def through_lua() -> int:
        taken, held = take(keys=[items_key, processing, writers, filling], args=["token", batch, 0])
        if taken:
            moved = client.lrange(processing, held, held + taken - 1)
            ack(
                keys=[processing, rejected, stats, writers, lease],
                args=["token", 10_000, len(moved), 0, 0, moved[0], moved[-1]],
            )
        return int(taken)

    def in_place() -> int:
        pipe = client.pipeline(transaction=True)
        pipe.hexists(writers, "token")
        pipe.lrange(items_key, 0, batch - 1)
        member, entries = pipe.execute()
        assert member
        if entries:
            ack(
                keys=[items_key, rejected, stats, writers, lease],
                args=["token", 10_000, len(entries), 0, 0, entries[0], entries[-1]],
            )
        return len(entries)

    out = {}
    try:
        for name, step in (("take.lua, then LRANGE", through_lua), ("in place", in_place)):
            fill()
            before, done = redis_cpu(client), 0
            while taken := step():
                done += taken
            assert done == items
            out[name] = (redis_cpu(client) - before) / items * 1e6
        client.delete(*keys)
    finally:
        client.close()
    return out


def writer_stages(
    redis_url: str, db_url: str, items: int, make: Callable[[int], bytes] = make_item
) -> dict[str, float]:
    """The writer's own CPU µs per item in each step of its batch loop, run in
    this process (the db_writer's garbage-collector settings applied): take
    (the script call and the LRANGE of its reply), parse, dedupe, the store's
    write (SQLite's work included; PostgreSQL's is the server's) and ack."""
    client = redis.Redis.from_url(redis_url)
    keys = RedisKeys("writer_stages")
    clear_buffer(client, keys)
    fill_buffer(client, keys.items, make, items)
    state = RedisState(redis_url, 0.05, 0.2, logging.getLogger(__name__))
    queue = ItemQueue(SyncRedisCalls(client, state), keys, lease_ttl=60)
    queue.join()
    store = open_store(parse_db_url(db_url), keys.spider)
    buffer = queue.buffers[0]
    spent = dict.fromkeys(("take", "parse", "dedupe", "write", "ack"), 0.0)
    clock = time.process_time
    try:
        while True:
            start = clock()
            entries = queue.take(buffer, 4000).entries
            taken = clock()
            spent["take"] += taken - start
            if not entries:
                break
            rows = parse_entries(entries, store_checks_json=store.CHECKS_JSON)[0]
            parsed = clock()
            rows = dedupe(rows)
            deduped = clock()
            store.write_batch(rows)
            written = clock()
            queue.ack(buffer, entries, len(rows), [])
            spent["parse"] += parsed - taken
            spent["dedupe"] += deduped - parsed
            spent["write"] += written - deduped
            spent["ack"] += clock() - written
    finally:
        store.close()
        clear_buffer(client, keys)
        client.close()
    return {step: cpu / items * 1e6 for step, cpu in spent.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--entries", choices=("json", "raw"), default="json")
    args = parser.parse_args(argv)
    make = make_raw_item if args.entries == "raw" else make_item
    print(
        "Targets, CPU per item in every process together: "
        + "; ".join(f"{db} ≤ {us:g} µs" for db, us in TARGET_WRITER_US.items()),
        flush=True,
    )
    server = RedisServer()
    pg = PostgresServer("writer_budget")
    settle_garbage_collector()  # writer_stages runs the writer's steps as its process would
    try:
        for _ in range(args.rounds):
            with tempfile.TemporaryDirectory(prefix="writer_budget_") as tmp:
                db = f"sqlite:///{Path(tmp) / 'items.db'}"
                report(measured_drain("SQLite", server.url, db, args.items, lambda: 0.0, make))
            clear_database(pg.url)
            server_cpu = lambda: postgres_cpu(pg)  # noqa: E731
            report(measured_drain("PostgreSQL", server.url, pg.url, args.items, server_cpu, make))
            clear_database(pg.url)
            floor = postgres_floor(pg, args.items)
            print(
                "  PostgreSQL's own CPU per row, COPY of rows made beforehand: "
                + "; ".join(f"{name} {us:.1f} µs" for name, us in floor.items()),
                flush=True,
            )
            with tempfile.TemporaryDirectory(prefix="writer_stages_") as tmp:
                sqlite_url = f"sqlite:///{Path(tmp) / 'items.db'}"
                for name, db in (("SQLite", sqlite_url), ("PostgreSQL", pg.url)):
                    steps = writer_stages(server.url, db, args.items // 2, make)
                    print(
                        f"  The writer's steps into {name}, CPU µs per item: "
                        + "; ".join(f"{step} {us:.2f}" for step, us in steps.items()),
                        flush=True,
                    )
            clear_database(pg.url)
            paths = take_paths(server.url, args.items // 2)
            print(
                "  Redis' CPU per item to take and acknowledge it: "
                + "; ".join(f"{name} {us:.2f} µs" for name, us in paths.items()),
                flush=True,
            )
            time.sleep(1)
    finally:
        pg.stop()
        server.stop()
    return 0


def report(result: WriterResult) -> None:
    budget = result.budget
    if budget is None:
        raise RuntimeError(f"the db_writer failed: {result.error}")
    server = f", the server {budget.server_us:.1f}" if budget.server_us else ""
    print(
        f"{result.database:<11} {result.items_per_s:8,.0f} items/s; CPU per item: the writer"
        f" {budget.writer_us:.1f} µs (start-up left out), Redis {budget.redis_us:.1f}{server};"
        f" all {budget.total_us:.1f} µs (target ≤ {TARGET_WRITER_US[result.database]:g});"
        f" two cores allow {budget.cores_allow:,.0f} items/s",
        flush=True,
    )


if __name__ == "__main__":
    raise SystemExit(main())
