"""What a db_writer store spends per item on each of its write paths.

    python -m tests.bench.store_paths [--items 100000] [--batch 4000] [--rewrite 40000]

The store alone, in this process (no Redis, no writer loop): the bench's
items (``db_writer.make_item``), parsed as the writer parses them, written
in batches first as new items, then again, newer, as items that exist. On
PostgreSQL the first are COPYed into the table and the second upserted
through the staging table (``stores.PostgresStore``), so the two lines are
the two paths; on SQLite both are the one upsert. Figures are wall time per
item of ``write_batch``, the server's work included; parsing is timed apart.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from spiders_project.db_writer.db_url import parse_db_url
from spiders_project.db_writer.entries import parse_entries
from spiders_project.db_writer.sql_store import SqlStore
from spiders_project.db_writer.stores import PostgresStore, open_store
from tests.bench.db_writer import distinct_chunks, make_item
from tests.support.services import PostgresServer


def batches(items: int, batch: int) -> Iterator[list[bytes]]:
    """``items`` distinct entries in batches; made again, the same urls are newer."""
    entries: list[bytes] = []
    for chunk in distinct_chunks(make_item, items):
        entries += chunk
        if len(entries) >= batch:
            yield entries
            entries = []
    if entries:
        yield entries


def measure(store: SqlStore[Any], items: int, batch: int, rewrite: int) -> dict[str, float]:
    """µs per item: parsing, writing new items, writing existing ones, and on
    PostgreSQL writing new items through the upsert (into a table of its own)."""
    parse = new = 0.0
    for entries in batches(items, batch):
        t0 = time.perf_counter()
        rows, _ = parse_entries(entries)
        t1 = time.perf_counter()
        store.write_batch(rows)
        parse += t1 - t0
        new += time.perf_counter() - t1
    old = 0.0
    for entries in batches(rewrite, batch):
        rows, _ = parse_entries(entries)
        t0 = time.perf_counter()
        store.write_batch(rows)
        old += time.perf_counter() - t0
    figures = {"parse": parse / items * 1e6, "new": new / items * 1e6}
    figures["existing"] = old / rewrite * 1e6
    if isinstance(store, PostgresStore):
        store._insert = lambda conn, rows: False  # type: ignore[method-assign]
        upserted = 0.0
        for entries in batches(items, batch):
            rows, _ = parse_entries(entries, {"PageItem": "items_upserted"})
            t0 = time.perf_counter()
            store.write_batch(rows)
            upserted += time.perf_counter() - t0
        figures["new, upserted"] = upserted / items * 1e6
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=4000)
    parser.add_argument("--rewrite", type=int, default=40_000)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="store_paths_") as tmp:
        sqlite = open_store(parse_db_url(f"sqlite:///{Path(tmp) / 'items.db'}"), "bench")
        assert isinstance(sqlite, SqlStore)
        report("SQLite", measure(sqlite, args.items, args.batch, args.rewrite))
        sqlite.close()
    pg = PostgresServer("store_paths")
    try:
        store = open_store(parse_db_url(pg.url), "bench")
        assert isinstance(store, SqlStore)
        report("PostgreSQL", measure(store, args.items, args.batch, args.rewrite))
        store.close()
    finally:
        pg.stop()
    return 0


def report(database: str, figures: dict[str, float]) -> None:
    line = f"{database:<11} parse {figures['parse']:5.2f} us/item, write new {figures['new']:5.2f}"
    line += f", write existing {figures['existing']:5.2f}"
    if "new, upserted" in figures:
        line += f", write new through the upsert {figures['new, upserted']:5.2f}"
    print(line, flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
