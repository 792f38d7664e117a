"""Two db_writers against one on the same item buffer: items/s and Redis CPU per item.

    python -m tests.bench.parallel_writers [--items 200000] [--rounds 2]
        [--rate 10000] [--push 20] [--seconds 10] [--databases sqlite,postgresql]

``--databases ""`` runs the stream alone, ``--seconds 0`` the drains alone.

One sitting: one private Redis, a temporary PostgreSQL (and SQLite files), and
the real ``python -m spiders_project.db_writer`` processes, one or two of them
on the buffer of one scratch spider, alternately, ``--rounds`` times:

- drain: ``--items`` items (``db_writer.make_item``, about 400 bytes) pushed
  first, then the writers started together (``--exit-when-empty``,
  DB_WRITER_MAX_WAIT=0); items/s from the first committed batch to the empty
  buffer, Redis' CPU (``INFO cpu``) over the same span per item, and Redis'
  calls per 1,000 items (``INFO commandstats``: every command, those the
  scripts call included);
- stream (PostgreSQL): a producer pushes ``--rate`` items/s, ``--push`` at a
  time as the workers' write batchers do, for ``--seconds``, while the writers
  (their defaults: batches filled for up to DB_WRITER_MAX_WAIT) keep up; Redis'
  CPU per item over the run, less what the producer's pushes cost alone (a run
  with no writer, the same pushes), so what is left is the writers' share:
  their takes, acks, and the waits that each push ends. That difference is
  noisy on a busy machine (the producer's own cost moves by more than the
  writers' share); the calls per 1,000 items are not. (``INFO commandstats``'
  times are no help: they are wall time, and grow when Redis waits for a core.)

Redis and PostgreSQL come from ``tests/support/services.py``, as in ``make bench``.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import redis

from spiders_project.keys import RedisKeys
from spiders_project.keys.db_writers import writers
from tests.bench.db_writer import clear_buffer, clear_database, fill_buffer, make_item
from tests.bench.seen import redis_cpu
from tests.support.processes import PYTHON, ROOT
from tests.support.services import PostgresServer, RedisServer

SPIDER = "parallelbench"
KEYS = RedisKeys(SPIDER)


@dataclass
class Run:
    mode: str  # "drain" or "stream"
    database: str
    writers: int
    items: int
    items_per_s: float
    redis_us: float  # Redis' CPU per item (the writers' share, for a stream)
    calls_per_1000: float  # Redis' calls per 1,000 items (a stream: less the producer's)
    batches: int
    load: float = 0.0  # the machine's 1-minute load average at the run's end

    def line(self) -> str:
        return (
            f"{self.mode:<6} {self.database:<10} {self.writers} writer{'s'[: self.writers - 1]:<1}"
            f" {self.items:>8,} items  {self.items_per_s:>9,.0f} items/s"
            f"  Redis {self.redis_us:5.2f} µs/item"
            f"  {self.calls_per_1000:5.1f} calls/1,000 items  {self.batches:>3,} batches"
            f"  (load {self.load:.1f})"
        )


def _calls(client: redis.Redis) -> int:
    return sum(int(s["calls"]) for s in client.info("commandstats").values())


def _start(redis_url: str, db_url: str, count: int, *settings: str) -> list[subprocess.Popen]:
    env = dict(os.environ, REDIS_URL=redis_url, DB_URL=db_url, LOG_LEVEL="WARNING")
    command = [PYTHON, "-m", "spiders_project.db_writer", "--spider", SPIDER, *settings]
    return [
        subprocess.Popen(command, cwd=ROOT, env=env, stderr=subprocess.PIPE) for _ in range(count)
    ]


def _end(processes: list[subprocess.Popen], timeout: float = 60) -> None:
    for process in processes:
        try:
            code = process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            code = process.wait()
        error = process.stderr.read().decode(errors="replace") if process.stderr else ""
        if code != 0:
            raise RuntimeError(f"a db_writer exited {code}: {error[-1500:]}")


def _stat(client: redis.Redis, name: str) -> int:
    return int(client.hget(KEYS.db_writer_stats, name) or 0)


def drain(
    client: redis.Redis, redis_url: str, db_url: str, database: str, n: int, count: int
) -> Run:
    """``count`` writers drain ``n`` items pushed beforehand."""
    clear_buffer(client, KEYS)
    clear_database(db_url)
    fill_buffer(client, KEYS.items, make_item, n)
    processes = _start(redis_url, db_url, count, "--exit-when-empty", "-s", "DB_WRITER_MAX_WAIT=0")
    while not client.hget(KEYS.db_writer_stats, "batches"):
        if all(p.poll() is not None for p in processes):
            break
        time.sleep(0.005)
    started, cpu, calls = time.perf_counter(), redis_cpu(client), _calls(client)
    written = _stat(client, "items_written")  # the first batch's
    while any(p.poll() is None for p in processes):
        time.sleep(0.01)
    seconds = time.perf_counter() - started
    cpu, calls = redis_cpu(client) - cpu, _calls(client) - calls
    _end(processes)
    total = _stat(client, "items_written")
    if total != n:
        raise RuntimeError(f"{total} items written of {n}")
    counted = total - written  # the items written over the measured span
    return Run(
        "drain",
        database,
        count,
        n,
        counted / seconds,
        cpu / counted * 1e6,
        calls / counted * 1000,
        _stat(client, "batches"),
        os.getloadavg()[0],
    )


def _produce(client: redis.Redis, rate: float, push: int, seconds: float) -> int:
    """Push ``rate`` items/s, ``push`` at a time, for ``seconds``; the items pushed."""
    entries = [make_item(i) for i in range(push)]
    every = push / rate
    pipe_client = redis.Redis(connection_pool=client.connection_pool)
    start = time.perf_counter()
    pushes = int(seconds / every)
    for i in range(pushes):
        delay = start + i * every - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        pipe_client.rpush(KEYS.items, *entries)
    return pushes * push


def stream(
    client: redis.Redis,
    redis_url: str,
    db_url: str,
    count: int,
    rate: float,
    push: int,
    seconds: float,
    alone: tuple[float, int],
) -> Run:
    """``count`` writers keep up with a producer; ``alone``: the producer's own
    (Redis CPU seconds, calls) for the same pushes."""
    clear_buffer(client, KEYS)
    clear_database(db_url)
    processes = _start(redis_url, db_url, count)
    while client.hlen(writers(KEYS)) < count:
        time.sleep(0.01)
    time.sleep(0.5)  # past their start: each is waiting on the buffer
    cpu, calls = redis_cpu(client), _calls(client)
    started = time.perf_counter()
    n = _produce(client, rate, push, seconds)
    while _stat(client, "items_written") < n:  # a few looks: the last batch's wait
        time.sleep(0.05)
    elapsed = time.perf_counter() - started
    cpu, calls = redis_cpu(client) - cpu - alone[0], _calls(client) - calls - alone[1]
    for process in processes:
        process.terminate()
    _end(processes)
    return Run(
        "stream",
        "PostgreSQL",
        count,
        n,
        n / elapsed,
        cpu / n * 1e6,
        calls / n * 1000,
        _stat(client, "batches"),
        os.getloadavg()[0],
    )


def producer_alone(
    client: redis.Redis, rate: float, push: int, seconds: float
) -> tuple[float, int]:
    """Redis' CPU seconds and calls for the producer's pushes with no writer."""
    clear_buffer(client, KEYS)
    cpu, calls = redis_cpu(client), _calls(client)
    _produce(client, rate, push, seconds)
    out = redis_cpu(client) - cpu, _calls(client) - calls
    clear_buffer(client, KEYS)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=200_000, help="items of each drain")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--rate", type=float, default=10_000, help="items/s of the stream")
    parser.add_argument("--push", type=int, default=20, help="items per push of the stream")
    parser.add_argument("--seconds", type=float, default=10, help="length of the stream")
    parser.add_argument("--databases", default="sqlite,postgresql")
    args = parser.parse_args(argv)
    databases = [name for name in args.databases.split(",") if name]  # "": the stream only
    given = " ".join(sys.argv[1:] if argv is None else argv)
    print(
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {platform.node()}, {os.cpu_count()} CPUs;"
        f" python -m tests.bench.parallel_writers {given}",
        flush=True,
    )
    server = RedisServer()
    pg = PostgresServer("parallel_writers")
    client = server.client
    runs: list[Run] = []
    try:
        for _ in range(args.rounds):
            for database in databases:
                for count in (1, 2):
                    with tempfile.TemporaryDirectory(prefix="parallel_writers_") as tmp:
                        db_url = (
                            pg.url
                            if database == "postgresql"
                            else f"sqlite:///{Path(tmp) / 'items.db'}"
                        )
                        name = "PostgreSQL" if database == "postgresql" else "SQLite"
                        runs.append(drain(client, server.url, db_url, name, args.items, count))
                    print(runs[-1].line(), flush=True)
            if args.seconds > 0:
                alone = producer_alone(client, args.rate, args.push, args.seconds)
                print(
                    f"stream producer alone: {alone[0] * 1e6 / (args.rate * args.seconds):.2f}"
                    f" µs/item of Redis CPU ({args.push} items per push)",
                    flush=True,
                )
                for count in (1, 2):
                    runs.append(
                        stream(
                            client,
                            server.url,
                            pg.url,
                            count,
                            args.rate,
                            args.push,
                            args.seconds,
                            alone,
                        )
                    )
                    print(runs[-1].line(), flush=True)
            clear_database(pg.url)
    finally:
        clear_buffer(client, KEYS)
        pg.stop()
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
