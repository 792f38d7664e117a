"""db_writer throughput into SQLite and PostgreSQL.

For each database: push N items (shaped like the spider's, about 400 bytes of
JSON) into the item buffer of a scratch spider in the bench's private Redis,
run the real db_writer process (``--exit-when-empty``, DB_WRITER_MAX_WAIT=0)
until the buffer is empty, and time it from its first committed batch on, so
the process' start-up (imports, connects) does not count as throughput.

``pages_phase`` times the `pages` table the same way: N page-state entries
(``recrawl.pages_row.page_entry``, about 200 bytes), every URL distinct, with
RECRAWL_AFTER set so each row gets its due time; ``make bench``'s db_writer
section reports it beside the items (rows "SQLite pages", "PostgreSQL pages").

The items' drain also measures the CPU each process spends per item
(:class:`Budget`, issue 42, item 6): the writer (its rusage, less what a
drain of no items costs: imports, connects), Redis (``INFO cpu``) and the
PostgreSQL cluster (every process of it, reaped backends included), over the
drain only (the buffer's filling left out). What two cores allow is 2 s of
CPU over that sum.

Both phases run the db_writer and PostgreSQL on every CPU. Before
2026-11-27 they inherited the benchmark's pinning (CPU 1, with Redis), so
the db_writer, its database and Redis shared one core while the other was
idle: a measure of one core, not of this machine. ``pinned=True`` measures
that way still, to compare with the figures of before.
"""

from __future__ import annotations

import os
import resource
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import orjson
import psutil
import psycopg
import redis

from spiders_project.db_writer.db_url import SQLITE, parse_db_url
from spiders_project.item_buffer.buffer import encode_entry
from spiders_project.keys import RedisKeys
from spiders_project.keys.db_writers import writers
from spiders_project.keys.item_entries import encode_raw
from spiders_project.recrawl.pages_row import page_entry
from tests.bench.seen import redis_cpu
from tests.support.processes import PYTHON, ROOT
from tests.support.services import PostgresServer, pin

SPIDER = "dbwriterbench"
# Issue 42, item 6: the db_writer's CPU per item in every process together
# (the writer, Redis, the database server), µs. They replace issue 29's
# 100,000 items/s, which two cores cannot give (docs/BENCHMARKS.md).
TARGET_WRITER_US = {"SQLite": 9.0, "PostgreSQL": 16.0}
CORES = 2


@dataclass(frozen=True)
class Budget:
    """CPU µs per item of one drain, in each process."""

    writer_us: float  # start-up left out
    redis_us: float
    server_us: float  # the database server's (0 for SQLite: in the writer)

    @property
    def total_us(self) -> float:
        return self.writer_us + self.redis_us + self.server_us

    @property
    def cores_allow(self) -> float:
        """Items/s that CORES cores allow at this cost, were every process busy all along."""
        return CORES * 1e6 / self.total_us if self.total_us > 0 else 0.0


@dataclass
class WriterResult:
    database: str
    items: int
    items_per_s: float  # from the first committed batch to the empty buffer
    drain_s: float  # process start to empty buffer (start-up included)
    steady_s: float
    exit_code: int
    error: str = ""
    budget: Budget | None = None  # the items' drains (not the pages table's)


def make_item(i: int) -> bytes:
    """A buffer entry as a worker writes it (``item_buffer.encode_entry``) for an item
    shaped like the spider's, about 400 bytes of JSON, keyed by its url."""
    url = f"http://bench.example/page/{i}"
    item = {
        "url": url,
        "status": 200,
        "title": f"Page {i} of the bench site",
        "fetched_at": datetime.now(UTC).isoformat(),
        "depth": i % 7,
        "links": [f"http://bench.example/page/{i + k}" for k in range(1, 4)],
        "text": "lorem ipsum dolor sit amet " * 8,
    }
    return encode_entry(item, "PageItem", url, datetime.now(UTC).isoformat())


def make_raw_item(i: int) -> bytes:
    """``make_item``'s entry in the header-and-item format (``keys/item_entries.py``)."""
    entry = orjson.loads(make_item(i))
    item = entry["item"]
    at = item.get("fetched_at") or entry["at"]
    made = encode_raw(entry["type"], entry["key"], entry["url"], at, orjson.dumps(item))
    assert made is not None
    return made


def make_page(i: int) -> bytes:
    """A page-state entry as a worker writes it, for a fetched page."""
    url = f"http://bench.example/page/{i}"
    at = datetime.now(UTC).isoformat()
    digest = "sha1:" + f"{i:032d}"
    return page_entry(url, "default", at, "fetched", status=200, etag=f'"{i}"', digest=digest)


def distinct_chunks(make: Callable[[int], bytes], count: int) -> Iterator[list[bytes]]:
    """``count`` entries of ``make``, every url distinct, 1,000 at a time.

    1,000 entries are made once and repeated with ``/page/`` changed per chunk:
    same size, distinct urls. Times in them are those of this call, so a second
    call makes the same urls, newer.
    """
    chunk = [make(i) for i in range(1000)]
    for start in range(0, count, 1000):
        page = f"/p{start}/".encode()
        yield [c.replace(b"/page/", page) for c in chunk]


def fill_buffer(client: redis.Redis, key: str, make: Callable[[int], bytes], count: int) -> None:
    """RPUSH ``count`` entries of ``make``, every url distinct, to ``key``, in one pipeline."""
    pipe = client.pipeline(transaction=False)
    for chunk in distinct_chunks(make, count):
        pipe.rpush(key, *chunk)
    pipe.execute()


def clear_buffer(client: redis.Redis, keys: RedisKeys) -> None:
    """The scratch spider's buffer, its writers' processing lists and counters, deleted."""
    lists = list(client.scan_iter(match=keys.prefix + "items:processing*", count=1000))
    client.delete(keys.items, keys.items_rejected, keys.db_writer_stats, writers(keys), *lists)


def clear_database(db_url: str) -> None:
    parsed = parse_db_url(db_url)
    if parsed.backend == SQLITE:
        assert parsed.path is not None
        for suffix in ("", "-wal", "-shm"):
            path = f"{parsed.path}{suffix}"
            if os.path.exists(path):
                os.remove(path)
        return
    with psycopg.connect(parsed.conninfo or "", autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS items")
        conn.execute("DROP TABLE IF EXISTS pages")


def run_writer_bench(
    database: str,
    redis_url: str,
    db_url: str,
    items: int,
    *,
    pages: bool = False,
    filled: Callable[[], None] | None = None,
    make: Callable[[int], bytes] = make_item,
) -> WriterResult:
    """Fill the scratch spider's buffer with ``items`` items (page-state entries
    with ``pages``) and time the drain; ``filled`` is called between the two
    (``writer_budget.py`` reads its CPU counters there)."""
    keys = RedisKeys(SPIDER)
    client = redis.Redis.from_url(redis_url)
    try:
        clear_buffer(client, keys)
        clear_database(db_url)
        fill_buffer(client, keys.items, make_page if pages else make, items)
        if filled is not None:
            filled()

        env = dict(os.environ, REDIS_URL=redis_url, DB_URL=db_url)
        command = [PYTHON, "-m", "spiders_project.db_writer", "--spider", SPIDER]
        command += ["--exit-when-empty", "-s", "DB_WRITER_MAX_WAIT=0"]
        if pages:
            command += ["-s", "RECRAWL_AFTER=86400"]
        started = time.perf_counter()
        process = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        first_batch_at = None
        while process.poll() is None:
            if first_batch_at is None and client.hget(keys.db_writer_stats, "batches"):
                first_batch_at = time.perf_counter()
            time.sleep(0.02)
        elapsed = time.perf_counter() - started
        steady = time.perf_counter() - (first_batch_at or started)
        written = int(client.hget(keys.db_writer_stats, "items_written") or 0)
        if pages:  # page entries are not items: every entry not rejected was written
            rejected = int(client.hget(keys.db_writer_stats, "rejected") or 0)
            written = items - rejected if process.returncode == 0 else 0
        output = process.stdout.read().decode(errors="replace") if process.stdout else ""
    finally:
        client.close()
    error = "" if process.returncode == 0 else output[-1500:]
    return WriterResult(
        database, written, written / steady, elapsed, steady, process.returncode, error
    )


def cpu_of(process: psutil.Process, reaped: bool = True) -> float:
    """A process' CPU seconds, with its reaped children's when ``reaped``."""
    times = process.cpu_times()
    own = times.user + times.system
    return own + times.children_user + times.children_system if reaped else own


def postgres_cpu(pg: PostgresServer) -> float:
    """CPU seconds of the cluster's processes: the postmaster with its reaped
    backends, and its live children."""
    postmaster = psutil.Process(int((pg.base / "data" / "postmaster.pid").read_text().split()[0]))
    total = cpu_of(postmaster)
    for child in postmaster.children():
        try:
            total += cpu_of(child)
        except psutil.NoSuchProcess:
            continue  # ended meanwhile: its CPU is in the postmaster's reaped children now
    return total


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measured_drain(
    database: str,
    redis_url: str,
    db_url: str,
    items: int,
    server: Callable[[], float],
    make: Callable[[int], bytes] = make_item,
) -> WriterResult:
    """A drain of ``items`` with its :class:`Budget`, after one of none for the
    writer's start-up. ``server``: the database server's CPU seconds so far."""
    client = redis.Redis.from_url(redis_url)
    marks: dict[str, float] = {}

    def filled() -> None:
        marks.update(writer=_children_cpu(), redis=redis_cpu(client), server=server())

    try:
        run_writer_bench(database, redis_url, db_url, 0, filled=filled)
        start_up = _children_cpu() - marks["writer"]
        result = run_writer_bench(database, redis_url, db_url, items, filled=filled, make=make)
        writer = _children_cpu() - marks["writer"] - start_up
        redis_used = redis_cpu(client) - marks["redis"]
        server_cpu = server() - marks["server"]
    finally:
        client.close()
    if result.exit_code == 0:
        per = 1e6 / items
        result.budget = Budget(writer * per, redis_used * per, server_cpu * per)
    return result


@contextmanager
def every_cpu(pinned: bool = False) -> Iterator[None]:
    """This process on every CPU for the block (unless ``pinned``), so the
    processes it starts (the db_writer, PostgreSQL) are too; its own pinning
    comes back after."""
    before = os.sched_getaffinity(0)
    if not pinned:
        pin(os.getpid(), None)
    try:
        yield
    finally:
        pin(os.getpid(), before)


def writer_phase(
    redis_url: str, items: int, with_postgres: bool = True, pinned: bool = False
) -> list[WriterResult]:
    with every_cpu(pinned):
        return _each_database(redis_url, items, with_postgres, pages=False)


def pages_phase(
    redis_url: str, entries: int, with_postgres: bool = True, pinned: bool = False
) -> list[WriterResult]:
    """The `pages` table's throughput in the db_writer, per database (see the module)."""
    with every_cpu(pinned):
        return _each_database(redis_url, entries, with_postgres, pages=True)


def _each_database(
    redis_url: str, n: int, with_postgres: bool, *, pages: bool
) -> list[WriterResult]:
    """SQLite, then a temporary PostgreSQL: items, or page entries with ``pages``. A
    PostgreSQL that cannot start is a row of the items' table; the pages phase lets
    it raise, as it always did."""
    label = " pages" if pages else ""
    results = []
    with tempfile.TemporaryDirectory(prefix="bench_sqlite_") as tmp:
        db = f"sqlite:///{Path(tmp) / 'items.db'}"
        if pages:
            results.append(run_writer_bench(f"SQLite{label}", redis_url, db, n, pages=True))
        else:
            results.append(measured_drain("SQLite", redis_url, db, n, lambda: 0.0))
    if with_postgres:
        try:
            pg = PostgresServer("bench_pages" if pages else "bench")
        except Exception as exc:  # reported in the table, the rest of the bench stands
            if pages:
                raise
            results.append(WriterResult("PostgreSQL", 0, 0.0, 0.0, 0.0, -1, str(exc)))
            return results
        try:
            if pages:
                results.append(
                    run_writer_bench("PostgreSQL pages", redis_url, pg.url, n, pages=True)
                )
            else:
                server = lambda: postgres_cpu(pg)  # noqa: E731
                results.append(measured_drain("PostgreSQL", redis_url, pg.url, n, server))
        finally:
            pg.stop()
    return results


def _writer_target(database: str) -> str:
    target = TARGET_WRITER_US.get(database)
    return f"≤ {target:g} µs" if target else "–"


def _cost(budget: Budget | None) -> str:
    if budget is None:
        return "| | "
    server = f", server {budget.server_us:.1f}" if budget.server_us else ""
    return (
        f"| {budget.total_us:.1f} µs (writer {budget.writer_us:.1f}, Redis {budget.redis_us:.1f}"
        f"{server}) | {budget.cores_allow:,.0f} "
    )


def section(results: list[WriterResult]) -> list[str]:
    """The db_writer section of docs/BENCHMARKS.md."""
    lines = [
        "## db_writer",
        "",
        "Per database (`tests/bench/db_writer.py`): N items (about 400 "
        "bytes of JSON each) pushed into a scratch item buffer in the private Redis, then the "
        "real db_writer process drains it (DB_WRITER_BATCH_SIZE as configured, "
        "DB_WRITER_MAX_WAIT=0). PostgreSQL is a temporary cluster on a free port. The *pages*"
        " rows are the `pages` table (issue 28): as many page-state entries, one per fetch"
        " outcome of a distinct URL, drained the same way into one row per URL. *CPU per"
        " item* is every process' over the drain (issue 42, item 6: the writer, its start-up"
        f" left out, Redis, the PostgreSQL cluster); *{CORES} cores allow* is {CORES} s of"
        " CPU a second over it, were the processes spread perfectly over the cores.",
        "",
        "| Database | Items | Items/s (first batch → empty buffer) | Drain time incl. "
        f"process start-up | CPU per item, all processes | {CORES} cores allow, items/s "
        "| Target |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for w in results:
        if w.error:
            lines.append(
                f"| {w.database} | failed: {' '.join(w.error.split())[:200]} | | | | | "
                f"{_writer_target(w.database)} |"
            )
            continue
        lines.append(
            f"| {w.database} | {w.items:,} | {w.items_per_s:,.0f} | {w.drain_s:.1f} s "
            f"{_cost(w.budget)}| {_writer_target(w.database)} |"
        )
    return lines
