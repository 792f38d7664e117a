"""The db_writer as operators run it: a real process, a real Redis, real databases.

Redis is the private server of ``tests/conftest.py``; PostgreSQL is a
temporary cluster on a free port, started once for the module (the machine's
own server on 5432 is never touched).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
import redis
from pytest_postgresql.executors import PostgreSQLExecutor
from pytest_postgresql.janitor import DatabaseJanitor

from spiders_project.keys import RedisKeys
from spiders_project.keys.db_writers import writers as writers_of
from tests.support.processes import Proc, items_in_hand
from tests.support.services import PostgresServer, find_pg_ctl

ROOT = Path(__file__).resolve().parents[2]
KEYS = RedisKeys("distributed")

# --- PostgreSQL ------------------------------------------------------------------


@pytest.fixture(scope="module")
def pg_server() -> Iterator[PostgreSQLExecutor]:
    """A temporary PostgreSQL cluster on a free port (tests/support/services.py)."""
    if find_pg_ctl() is None:
        pytest.fail("pg_ctl not found (make setup installs PostgreSQL)")
    server = PostgresServer("db_writer_tests")
    try:
        yield server.executor
    finally:
        server.stop()


# --- the databases under test --------------------------------------------------------


@dataclass
class Database:
    """Where a test's writer stores items, and how the test reads them back."""

    url: str
    read: Callable[[str], list[tuple[Any, ...]]]

    def rows(self) -> dict[str, tuple[str, Any, str]]:
        """url -> (spider, data as parsed JSON, scraped_at as ISO-8601 UTC), of table items."""
        found = self.read("SELECT url, spider, data, scraped_at FROM items")
        return {url: (spider, as_json(data), iso_utc(at)) for url, spider, data, at in found}

    def items(self, table: str = "items") -> dict[tuple[str, str, str], tuple[Any, ...]]:
        """(spider, item_type, item_key) -> (url, data as parsed JSON, scraped_at)."""
        found = self.read(f"SELECT spider, item_type, item_key, url, data, scraped_at FROM {table}")
        return {
            (spider, item_type, key): (url, as_json(data), iso_utc(at))
            for spider, item_type, key, url, data, at in found
        }


def as_json(data: Any) -> Any:
    """``data`` as parsed JSON: SQLite keeps text, PostgreSQL's JSONB arrives parsed."""
    return json.loads(data) if isinstance(data, str) else data


def iso_utc(value: object) -> str:
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat(timespec="microseconds")
    return str(value)


def sqlite_database(directory: Path) -> Database:
    path = directory / "data" / "items.db"

    def read(query: str) -> list[tuple[Any, ...]]:
        if not path.exists():
            return []
        with sqlite3.connect(path) as conn:
            try:
                return conn.execute(query).fetchall()
            except sqlite3.OperationalError as exc:
                if "no such table" in str(exc):
                    return []
                raise

    return Database("sqlite:///data/items.db", read)


@pytest.fixture
def pg_database(pg_server: PostgreSQLExecutor) -> Iterator[Database]:
    """An empty database of its own in the temporary cluster."""
    name = f"items_{uuid.uuid4().hex[:8]}"
    host, port = pg_server.host, pg_server.port
    janitor = DatabaseJanitor(user="postgres", host=host, port=port, dbname=name)
    janitor.init()
    url = f"postgresql://postgres@{host}:{port}/{name}"

    def read(query: str) -> list[tuple[Any, ...]]:
        with psycopg.connect(url) as conn:
            try:
                return conn.execute(query).fetchall()  # type: ignore[arg-type]
            except psycopg.errors.UndefinedTable:
                return []

    yield Database(url, read)
    janitor.drop()


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Database:
    if request.param == "sqlite":
        return sqlite_database(tmp_path)
    return request.getfixturevalue("pg_database")


# --- running the writer ------------------------------------------------------------


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    connection = redis.Redis.from_url(redis_url)
    yield connection
    connection.close()


def writer_env(redis_url: str, db_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DB_WRITER_")}
    env.update(REDIS_URL=redis_url, DB_URL=db_url, PYTHONPATH=str(ROOT), LOG_LEVEL="INFO")
    return env


def writer_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "spiders_project.db_writer", *args]


def run_writer(
    cwd: Path, redis_url: str, db_url: str, *args: str, timeout: float = 30
) -> subprocess.CompletedProcess[str]:
    """Run the writer with --exit-when-empty and no batching delay; return its output."""
    return subprocess.run(
        writer_command("--exit-when-empty", "-s", "DB_WRITER_MAX_WAIT=0", *args),
        cwd=cwd,
        env=writer_env(redis_url, db_url),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


class Writer(Proc):
    """A writer running in the background; its log goes to a file the test can read."""

    def __init__(self, cwd: Path, redis_url: str, db_url: str, *args: str) -> None:
        name = f"writer-{uuid.uuid4().hex[:6]}"
        env = writer_env(redis_url, db_url)
        log_path = cwd / f"{name}.log"
        super().__init__(name, writer_command(*args), env, log_path, cwd=cwd, inherit_env=False)
        self.process = self.popen

    def wait_log(self, text: str, timeout: float = 15) -> None:
        wait_for(lambda: text in self.log(), timeout, f"{text!r} in the log:\n{self.log()}")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15) -> int:  # type: ignore[override]
        """Send ``sig`` and wait for the exit status (a hang fails the test)."""
        self.signal(sig)
        return self.popen.wait(timeout)

    def kill(self) -> None:
        self.close()


@pytest.fixture
def writers() -> Iterator[list[Writer]]:
    """Background writers of a test, killed at its end if still running."""
    started: list[Writer] = []
    yield started
    for writer in started:
        writer.kill()


def wait_for(condition: Callable[[], object], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


def stat(client: redis.Redis, field: str) -> int:
    return int(client.hget(KEYS.db_writer_stats, field) or 0)


def encode(entry: object) -> bytes:
    return entry if isinstance(entry, bytes) else json.dumps(entry).encode()


def push_many(client: redis.Redis, key: str, entries: list[bytes]) -> None:
    pipe = client.pipeline(transaction=False)
    for start in range(0, len(entries), 5000):
        pipe.rpush(key, *entries[start : start + 5000])
    pipe.execute()


def numbered_items(count: int, distinct: int, version: Callable[[int], int]) -> list[bytes]:
    """``count`` items over ``distinct`` urls; item i has url i % distinct."""
    return [
        encode({"url": f"http://site.test/{i % distinct}", "v": version(i), "pad": "x" * 200})
        for i in range(count)
    ]


# --- tests -------------------------------------------------------------------------


def test_writes_upserts_and_rejects(
    database: Database, client: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    good = [
        {"url": "http://a.test/1", "v": 1, "fetched_at": "2026-01-02T03:04:05Z"},
        {"url": "http://a.test/2", "v": 1},
        {"url": "http://a.test/1", "v": 2, "fetched_at": "2026-01-02T04:00:00+01:00"},
        {"url": "http://a.test/3", "v": 1, "fetched_at": 1767323045},
        {"url": "http://a.test/2", "v": 3, "fetched_at": "2026-01-05T00:00:00"},
        {"url": "http://a.test/4", "v": 1, "fetched_at": "yesterday"},
    ]
    bad = [b"not json{", encode({"title": "no url"}), b"\xff\xfe not UTF-8", encode([1, 2])]
    bad += [encode({"url": 7}), encode({"url": "http://a.test/\u0000"})]
    # Batches of 4: duplicates within one batch (a.test/1) and across batches (a.test/2).
    entries = [encode(good[0]), encode(good[1]), bad[0], encode(good[2])]
    entries += [bad[1], bad[2], encode(good[3]), bad[3]]
    entries += [encode(good[4]), bad[4], encode(good[5]), bad[5]]
    push_many(client, KEYS.items, entries)

    before = datetime.now(UTC).isoformat(timespec="microseconds")
    done = run_writer(tmp_path, redis_url, database.url, "-s", "DB_WRITER_BATCH_SIZE=4")
    assert done.returncode == 0, done.stderr

    rows = database.rows()
    assert sorted(rows) == [
        "http://a.test/1",
        "http://a.test/2",
        "http://a.test/3",
        "http://a.test/4",
    ]
    # Newer wins: good[2] came later but was fetched earlier (03:00 UTC) than good[0].
    assert rows["http://a.test/1"] == (
        "distributed",
        good[0],
        "2026-01-02T03:04:05.000000+00:00",
    )
    # good[1] has no fetched_at: it was scraped when read, later than good[4]'s date.
    assert rows["http://a.test/2"][1] == good[1]
    assert rows["http://a.test/2"][2] >= before
    assert rows["http://a.test/3"][2] == "2026-01-02T03:04:05.000000+00:00"
    assert rows["http://a.test/4"][2] >= before  # unusable fetched_at: time of writing

    assert client.lrange(KEYS.items_rejected, 0, -1) == bad
    assert client.llen(KEYS.items) == 0
    assert items_in_hand(client) == 0
    assert client.hlen(writers_of(KEYS)) == 0  # it left the writers at its stop
    assert (stat(client, "items_written"), stat(client, "rejected")) == (6, 6)
    assert stat(client, "batches") == 3
    assert float(client.hget(KEYS.db_writer_stats, "last_batch_at")) == pytest.approx(
        time.time(), abs=60
    )
    warnings = [line for line in done.stderr.splitlines() if "WARNING" in line]
    assert len(warnings) == 6
    assert "not valid JSON" in warnings[0] and "b'not json{'" in warnings[0]
    assert "connected: redis" in done.stderr and "stopped" in done.stderr
    assert "Traceback" not in done.stderr


def test_takes_over_the_previous_releases_processing_list_first(
    client: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    # A crashed writer of the previous release left three entries in its one
    # processing list, and its lock expired; newer ones wait in the buffer.
    push_many(
        client,
        KEYS.items_processing,
        [
            encode({"url": "http://r.test/a", "v": 1}),
            b"garbage",
            encode({"url": "http://r.test/b"}),
        ],
    )
    push_many(
        client,
        KEYS.items,
        [encode({"url": "http://r.test/a", "v": 2}), encode({"url": "http://r.test/c"})],
    )
    database = sqlite_database(tmp_path)

    done = run_writer(tmp_path, redis_url, database.url)

    assert done.returncode == 0, done.stderr
    assert "took over 3 entries of distributed:items:processing, whose lock is gone" in (
        done.stderr
    )
    rows = database.rows()
    assert sorted(rows) == ["http://r.test/a", "http://r.test/b", "http://r.test/c"]
    assert rows["http://r.test/a"][1]["v"] == 2  # order kept: recovery first
    assert client.lrange(KEYS.items_rejected, 0, -1) == [b"garbage"]
    assert items_in_hand(client) == 0


def test_sigkill_mid_batch_loses_and_duplicates_nothing(
    client: redis.Redis, redis_url: str, tmp_path: Path, writers: list[Writer]
) -> None:
    # 50,000 items over 45,000 urls; the 5,000 repeated urls get a newer version.
    entries = numbered_items(50_000, 45_000, version=lambda i: i // 45_000)
    push_many(client, KEYS.items, entries)
    database = sqlite_database(tmp_path)

    ttl = ("-s", "DB_WRITER_LOCK_TTL=2")
    writer = Writer(tmp_path, redis_url, database.url, "-s", "DB_WRITER_MAX_WAIT=0.05", *ttl)
    writers.append(writer)
    wait_for(lambda: stat(client, "items_written") >= 5_000, 20, "5,000 items written")
    # Mid-batch: stopped at a moment it holds a batch it has not acknowledged, then killed.
    deadline = time.monotonic() + 30
    while True:
        assert time.monotonic() < deadline, "the writer never held a batch"
        os.kill(writer.process.pid, signal.SIGSTOP)
        if items_in_hand(client):
            break
        os.kill(writer.process.pid, signal.SIGCONT)
        time.sleep(0.005)
    writer.process.send_signal(signal.SIGKILL)
    writer.process.wait(10)
    assert stat(client, "items_written") < 50_000, "the writer finished before it was killed"
    assert items_in_hand(client) > 0, "killed between two batches"

    done = run_writer(tmp_path, redis_url, database.url, *ttl)

    assert done.returncode == 0, done.stderr
    # The lease names no host or pid: the successor waits out its TTL, then takes over.
    assert re.search(r"took over \d+ entries of db_writer \w+, whose lease is gone", done.stderr)
    with sqlite3.connect(tmp_path / "data" / "items.db") as conn:
        total, distinct = conn.execute("SELECT count(*), count(DISTINCT url) FROM items").fetchone()
        newer = conn.execute(
            "SELECT count(*) FROM items WHERE json_extract(data, '$.v') = 1"
        ).fetchone()[0]
    assert total == distinct == 45_000
    assert newer == 5_000
    assert client.llen(KEYS.items) == items_in_hand(client) == 0
    assert stat(client, "items_written") >= 50_000  # at least once: replays are upserts


def test_sigterm_finishes_the_batch_in_hand(
    client: redis.Redis, redis_url: str, tmp_path: Path, writers: list[Writer]
) -> None:
    push_many(client, KEYS.items, numbered_items(50_000, 50_000, version=lambda i: 0))
    database = sqlite_database(tmp_path)

    writer = Writer(tmp_path, redis_url, database.url, "-s", "DB_WRITER_MAX_WAIT=0.05")
    writers.append(writer)
    wait_for(lambda: stat(client, "items_written") >= 5_000, 20, "5,000 items written")
    assert writer.stop(signal.SIGTERM) == 0

    log = writer.log()
    assert "draining" in log and log.rstrip().endswith("stopped"), log
    assert items_in_hand(client) == 0  # the batch in hand was committed and acked
    assert len(database.rows()) == stat(client, "items_written")

    done = run_writer(tmp_path, redis_url, database.url)
    assert done.returncode == 0, done.stderr
    assert len(database.rows()) == 50_000
    assert stat(client, "items_written") == 50_000  # nothing written twice after a clean stop


def test_sigterm_while_the_database_is_locked_keeps_the_batch(
    client: redis.Redis, redis_url: str, tmp_path: Path, writers: list[Writer]
) -> None:
    database = sqlite_database(tmp_path)
    writer = Writer(tmp_path, redis_url, database.url, "-s", "DB_WRITER_BATCH_SIZE=50")
    writers.append(writer)
    writer.wait_log("connected")
    # Another session holds SQLite's write lock: every write times out and is retried.
    blocker = sqlite3.connect(tmp_path / "data" / "items.db", isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        push_many(client, KEYS.items, numbered_items(50, 50, version=lambda i: 0))
        writer.wait_log("unavailable, retrying")
        started = time.monotonic()
        assert writer.stop(signal.SIGTERM) == 0
        # At most one SQLite busy timeout (2 s) for the write under way.
        assert time.monotonic() - started < 5
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()

    log = writer.log()
    assert "stopping without finishing the batch in hand" in log, log
    assert "50 entries left for another db_writer to take over" in log, log
    assert log.rstrip().endswith("stopped") and "Traceback" not in log, log
    assert items_in_hand(client) == 50
    assert database.rows() == {}

    # Its lease went with its stop: the next writer takes the batch over at once.
    started = time.monotonic()
    done = run_writer(tmp_path, redis_url, database.url)
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - started < 8  # not DB_WRITER_LOCK_TTL (10 s) after the stop
    assert "took over 50 entries of db_writer" in done.stderr
    assert len(database.rows()) == 50 and stat(client, "items_written") == 50


def test_redis_unreachable_at_start_is_one_line(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again when the block ends
    url = f"redis://:secret@127.0.0.1:{port}/0"

    done = run_writer(tmp_path, url, "sqlite:///data/items.db", timeout=20)

    assert done.returncode != 0
    output = (done.stdout + done.stderr).strip().splitlines()
    assert len(output) == 1, output
    assert f"redis://:***@127.0.0.1:{port}/0" in output[0]
    assert "Traceback" not in output[0] and "secret" not in output[0]


def test_bad_db_url_is_one_line(redis_url: str, tmp_path: Path) -> None:
    done = run_writer(tmp_path, redis_url, "mysql://user:pw@host/db")

    assert done.returncode == 2
    output = done.stderr.strip().splitlines()
    assert len(output) == 1 and "unsupported scheme 'mysql'" in output[0], output
    assert "pw" not in output[0]


def test_redis_connection_lost_and_back(
    client: redis.Redis, redis_url: str, tmp_path: Path, writers: list[Writer]
) -> None:
    database = sqlite_database(tmp_path)
    writer = Writer(tmp_path, redis_url, database.url, "-s", "DB_WRITER_MAX_WAIT=0.05")
    writers.append(writer)
    writer.wait_log("connected")
    push_many(client, KEYS.items, numbered_items(1000, 1000, version=lambda i: 0))
    wait_for(lambda: len(database.rows()) == 1000, 15, "the first 1,000 rows")

    client.client_kill_filter(_type="normal", skipme=True)  # drops the writer's connection
    push_many(client, KEYS.items, numbered_items(2000, 2000, version=lambda i: 0))
    wait_for(lambda: len(database.rows()) == 2000, 15, "2,000 rows")

    assert writer.stop() == 0
    log = writer.log()
    assert log.count("Redis connection lost") == 1, log
    assert log.count("Redis reconnected") == 1, log
    assert items_in_hand(client) == 0


def test_a_second_writer_writes_beside_the_first(
    client: redis.Redis, redis_url: str, tmp_path: Path, writers: list[Writer]
) -> None:
    database = sqlite_database(tmp_path)
    first = Writer(tmp_path, redis_url, database.url)
    writers.append(first)
    first.wait_log("joined the db_writers of distributed:items")
    second = Writer(tmp_path, redis_url, database.url)
    writers.append(second)
    second.wait_log("joined the db_writers of distributed:items")
    assert client.hlen(writers_of(KEYS)) == 2  # neither waits for the other

    push_many(client, KEYS.items, numbered_items(100, 100, version=lambda i: 0))
    wait_for(lambda: len(database.rows()) == 100, 15, "100 rows")
    assert second.stop() == 0
    assert first.process.poll() is None
    assert first.stop() == 0
    assert client.hlen(writers_of(KEYS)) == 0 and items_in_hand(client) == 0


def test_postgresql_down_then_back(
    pg_server: PostgreSQLExecutor,
    pg_database: Database,
    client: redis.Redis,
    redis_url: str,
    tmp_path: Path,
    writers: list[Writer],
) -> None:
    push_many(client, KEYS.items, numbered_items(2000, 2000, version=lambda i: 0))
    writer = Writer(tmp_path, redis_url, pg_database.url, "-s", "DB_WRITER_MAX_WAIT=0.05")
    writers.append(writer)
    wait_for(lambda: len(pg_database.rows()) == 2000, 15, "the first 2,000 rows")

    pg_server.stop()
    try:
        # 3,000 entries over 2,500 urls, 500 of them already written before.
        push_many(client, KEYS.items, numbered_items(3000, 2500, version=lambda i: 1))
        writer.wait_log("unavailable, retrying")
        time.sleep(1)  # a few retries against the stopped server
        assert items_in_hand(client) > 0
    finally:
        pg_server.start()
    writer.wait_log("available again", timeout=40)
    wait_for(
        lambda: client.llen(KEYS.items) == items_in_hand(client) == 0,
        15,
        "the buffer to drain",
    )
    assert writer.stop() == 0

    rows = pg_database.rows()
    assert len(rows) == 2500
    assert all(data["v"] == 1 for _, data, _ in rows.values())
    log = writer.log()
    assert log.count("unavailable, retrying") == 1, log
    assert "Traceback" not in log
    assert re.search(r"ERROR: postgresql://postgres@[^ ]+ unavailable", log), log


def test_postgresql_refused_row_is_rejected_alone(
    pg_database: Database, client: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    # Valid JSON with a url too large for a btree index entry: PostgreSQL
    # refuses that row, and only that row, forever.
    huge = encode({"url": "http://big.test/" + secrets.token_urlsafe(15_000)})
    entries = [encode({"url": f"http://ok.test/{i}"}) for i in range(10)]
    entries.insert(4, huge)
    push_many(client, KEYS.items, entries)

    done = run_writer(tmp_path, redis_url, pg_database.url)

    assert done.returncode == 0, done.stderr
    assert sorted(pg_database.rows()) == sorted(f"http://ok.test/{i}" for i in range(10))
    assert client.lrange(KEYS.items_rejected, 0, -1) == [huge]
    assert (stat(client, "items_written"), stat(client, "rejected")) == (10, 1)
    refused = [line for line in done.stderr.splitlines() if "refused" in line]
    assert len(refused) == 1 and "ProgramLimitExceeded" in refused[0], done.stderr
