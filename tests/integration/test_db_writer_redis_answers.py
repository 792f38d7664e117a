"""The db_writer against Redis refusing writes (OOM, READONLY), its lock, and newer-wins.

Real processes: a redis-server of each test's own (these tests change its
maxmemory and its replication role, so never the session's shared server
and never the one on 6379), the db_writer as ``python -m
spiders_project.db_writer``, SQLite and a temporary PostgreSQL.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import sqlite3
import time
from pathlib import Path

import pytest
import redis
from mirakuru import TCPExecutor
from port_for import get_port

from spiders_project.db_writer.item_queue import ItemQueue, LockLost
from spiders_project.redis_access import RedisState, SyncRedisCalls
from tests.integration import test_db_writer as base
from tests.integration.test_db_writer import (
    KEYS,
    Writer,
    encode,
    run_writer,
    sqlite_database,
    stat,
    wait_for,
)

# The fixtures of the db_writer tests, shared; ``client`` talks to this file's redis_url.
client = base.client
database = base.database
pg_database = base.pg_database
pg_server = base.pg_server
writers = base.writers


@pytest.fixture
def own_server(start_redis) -> tuple[TCPExecutor, str]:
    """A redis-server of this test's own, on a free port, without persistence."""
    return start_redis()


@pytest.fixture
def redis_server(own_server: tuple[TCPExecutor, str]) -> TCPExecutor:
    return own_server[0]


@pytest.fixture
def redis_url(own_server: tuple[TCPExecutor, str]) -> str:
    """Overrides conftest's shared server with this test's own (the test reconfigures it)."""
    return own_server[1]


# --- helpers -----------------------------------------------------------------------


def push_items(client: redis.Redis, n: int, prefix: str) -> set[str]:
    urls = [f"{prefix}{i}" for i in range(n)]
    client.rpush(KEYS.items, *(encode({"url": u, "filler": "x" * 200}) for u in urls))
    return set(urls)


def used_memory(client: redis.Redis) -> int:
    return int(client.info("memory")["used_memory"])


def make_oom(client: redis.Redis, maxmemory: int) -> None:
    """maxmemory with noeviction; a plain SET (the old lock's SET NX) is refused now."""
    client.config_set("maxmemory-policy", "noeviction")
    client.config_set("maxmemory", maxmemory)
    with pytest.raises(redis.exceptions.OutOfMemoryError):
        client.set("probe", "x")


def make_replica(client: redis.Redis) -> None:
    """Read-only replica of a port where nothing listens: the sync never succeeds, data is kept."""
    client.config_set("replica-read-only", "yes")
    client.execute_command("REPLICAOF", "127.0.0.1", get_port(None))
    with pytest.raises(redis.exceptions.ReadOnlyError):
        client.rpush(KEYS.items, b"probe")


def blocked_clients(client: redis.Redis) -> list[dict]:
    return [c for c in client.client_list() if "b" in c["flags"]]


def refusals(client: redis.Redis, code: str) -> int:
    """How many replies of error ``code`` (OOM, READONLY...) Redis has sent (INFO errorstats)."""
    return int(client.info("errorstats").get(f"errorstat_{code}", {}).get("count", 0))


def wait_refused_again(client: redis.Redis, code: str, times: int = 2) -> None:
    """Wait until Redis has refused ``times`` more calls with ``code``: the writer
    (the only client writing) is still calling, past the refusal it logged."""
    seen = refusals(client, code)
    wait_for(lambda: refusals(client, code) >= seen + times, 10, f"{times} more {code} refusals")


# --- Redis out of memory, read-only ------------------------------------------------------


def test_starts_and_drains_while_redis_is_out_of_memory(
    client: redis.Redis, redis_url: str, tmp_path: Path
) -> None:
    empty = used_memory(client)
    urls = push_items(client, 3000, "http://oom.test/")
    full = used_memory(client)
    # Under the memory in use, by half of what the items take: Redis stays full
    # until the writer has drained about half of them.
    make_oom(client, (empty + full) // 2)
    db = sqlite_database(tmp_path)

    done = run_writer(tmp_path, redis_url, db.url, "-s", "DB_WRITER_BATCH_SIZE=100")

    assert done.returncode == 0, done.stderr
    assert set(db.rows()) == urls
    assert client.llen(KEYS.items) == 0 and client.llen(KEYS.items_processing) == 0
    assert stat(client, "items_written") == 3000 and stat(client, "batches") == 30
    assert client.get(KEYS.db_writer_lock) is None  # taken and released
    assert done.stderr.count("Redis refuses writes") <= 1, done.stderr
    assert "Traceback" not in done.stderr
    client.set("probe", "x")  # the writer freed what kept the producers out


def test_keeps_draining_through_oom_and_readonly(
    client: redis.Redis, redis_url: str, tmp_path: Path, writers: list[Writer]
) -> None:
    db = sqlite_database(tmp_path)
    writer = Writer(
        tmp_path,
        redis_url,
        db.url,
        "-s",
        "DB_WRITER_MAX_WAIT=0.05",
        "-s",
        "DB_WRITER_BATCH_SIZE=100",
    )
    writers.append(writer)
    writer.wait_log("connected")
    urls = push_items(client, 1000, "http://a.test/")
    wait_for(lambda: set(db.rows()) == urls, 20, "the first 1,000 rows")

    # Out of memory: 1 byte, so Redis stays full whatever the writer frees.
    urls |= push_items(client, 1000, "http://b.test/")
    make_oom(client, 1)
    wait_for(lambda: set(db.rows()) == urls, 20, "rows written while Redis is full")
    writer.wait_log("Redis refuses writes (OOM")  # the idle BLMOVE is refused
    # Idle under OOM: it polls the buffer and tries BLMOVE again, refused; it
    # must not exit, nor log again.
    wait_refused_again(client, "OOM")
    assert writer.process.poll() is None
    assert writer.log().count("Redis refuses writes (") == 1
    client.config_set("maxmemory", 0)
    writer.wait_log("Redis accepts writes again")

    # Read-only. The writer is paused while the role changes, after a push has
    # served any BLMOVE it had blocked: a blocked call would be ended with
    # UNBLOCKED, and this test wants the refusal a busy writer meets.
    os.kill(writer.process.pid, signal.SIGSTOP)
    try:
        urls |= push_items(client, 2000, "http://c.test/")
        assert blocked_clients(client) == []
        make_replica(client)
    finally:
        os.kill(writer.process.pid, signal.SIGCONT)
    writer.wait_log("Redis refuses writes (READONLY")
    wait_refused_again(client, "READONLY")  # retrying with backoff against the replica
    assert writer.process.poll() is None
    assert client.llen(KEYS.items) + client.llen(KEYS.items_processing) > 0
    client.execute_command("REPLICAOF", "NO", "ONE")
    wait_for(lambda: set(db.rows()) == urls, 20, "rows after REPLICAOF NO ONE")
    wait_for(
        lambda: writer.log().count("Redis accepts writes again") == 2, 10, "writes accepted again"
    )

    assert writer.stop() == 0
    log = writer.log()
    assert set(db.rows()) == urls
    assert log.count("Redis refuses writes (") == 2, log  # one per episode: OOM, READONLY
    assert log.count("Redis refuses writes (READONLY") == 1, log
    assert log.count("Redis accepts writes again") == 2, log
    assert "Traceback" not in log and "ERROR" not in log
    assert client.llen(KEYS.items) == client.llen(KEYS.items_processing) == 0


def test_waits_out_noreplicas(
    client: redis.Redis, redis_url: str, tmp_path: Path, writers: list[Writer]
) -> None:
    # min-replicas-to-write without a replica: a master cut off from its
    # replicas (tests/e2e/test_jepsen.py). The writer waits; nothing is lost.
    db = sqlite_database(tmp_path)
    writer = Writer(tmp_path, redis_url, db.url, "-s", "DB_WRITER_MAX_WAIT=0.05")
    writers.append(writer)
    writer.wait_log("connected")
    urls = push_items(client, 100, "http://a.test/")
    wait_for(lambda: set(db.rows()) == urls, 20, "the first rows")
    os.kill(writer.process.pid, signal.SIGSTOP)  # the items arrive before the refusal
    try:
        more = push_items(client, 100, "http://b.test/")
        client.config_set("min-replicas-to-write", 1)
    finally:
        os.kill(writer.process.pid, signal.SIGCONT)
    writer.wait_log("Redis refuses writes (NOREPLICAS")
    wait_refused_again(client, "NOREPLICAS")  # waiting with backoff: must not exit, nor log again
    assert writer.process.poll() is None and set(db.rows()) == urls
    assert writer.log().count("Redis refuses writes (") == 1
    client.config_set("min-replicas-to-write", 0)
    wait_for(lambda: set(db.rows()) == urls | more, 20, "rows once writes are taken again")
    writer.wait_log("Redis accepts writes again")
    assert writer.stop() == 0
    log = writer.log()
    assert log.count("Redis refuses writes (") == 1, log
    assert "Traceback" not in log and "ERROR" not in log
    assert client.llen(KEYS.items) == client.llen(KEYS.items_processing) == 0


# --- stop requested while retrying ---------------------------------------------------


def test_sigterm_while_redis_is_away_stops_at_once(
    redis_server: TCPExecutor, redis_url: str, tmp_path: Path, writers: list[Writer]
) -> None:
    writer = Writer(tmp_path, redis_url, sqlite_database(tmp_path).url)
    writers.append(writer)
    writer.wait_log("connected")
    redis_server.stop()
    writer.wait_log("Redis connection lost")
    time.sleep(1.0)  # a few retries with backoff

    started = time.monotonic()
    assert writer.stop(signal.SIGTERM) == 0
    assert time.monotonic() - started < 3

    log = writer.log()
    assert log.rstrip().endswith("stopped"), log
    assert "Traceback" not in log


def test_sigterm_while_redis_refuses_the_ack_keeps_the_batch(
    client: redis.Redis, redis_url: str, tmp_path: Path, writers: list[Writer]
) -> None:
    db = sqlite_database(tmp_path)
    # One full batch of 50: taken in one call, so the writer goes straight to
    # the database without a blocking wait the role change would end (UNBLOCKED).
    writer = Writer(tmp_path, redis_url, db.url, "-s", "DB_WRITER_BATCH_SIZE=50")
    writers.append(writer)
    writer.wait_log("connected")
    # Hold SQLite's write lock so the batch is taken but not committed yet.
    blocker = sqlite3.connect(tmp_path / "data" / "items.db", isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        urls = push_items(client, 50, "http://h.test/")
        wait_for(lambda: client.llen(KEYS.items_processing) == 50, 10, "the batch taken")
        assert blocked_clients(client) == []
        make_replica(client)
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    writer.wait_log("Redis refuses writes (READONLY")  # the ack, after the commit
    assert writer.stop(signal.SIGTERM) == 0

    log = writer.log()
    assert "stopping without finishing the batch in hand" in log, log
    assert "Traceback" not in log
    assert client.llen(KEYS.items_processing) == 50  # committed, not acknowledged
    client.execute_command("REPLICAOF", "NO", "ONE")

    done = run_writer(tmp_path, redis_url, db.url)
    assert done.returncode == 0, done.stderr
    assert "recovering 50 entries" in done.stderr
    assert set(db.rows()) == urls
    assert client.llen(KEYS.items_processing) == 0
    assert stat(client, "items_written") == 50  # the refused ack never counted


# --- the lock ---------------------------------------------------------------------------


def test_lock_is_owned_by_a_token_not_by_host_and_pid(client: redis.Redis, redis_url: str) -> None:
    """Two queues in one process (one hostname, one pid, as replicas in containers)."""
    state = RedisState(redis_url, 0.05, 0.2, logging.getLogger("test"))
    first = ItemQueue(SyncRedisCalls(client, state), KEYS, lock_ttl=0.5)
    second = ItemQueue(SyncRedisCalls(client, state), KEYS, lock_ttl=0.5)
    client.rpush(KEYS.items, encode({"url": "http://l.test/1"}))

    assert first.try_lock()
    token = client.get(KEYS.db_writer_lock).decode()
    assert token == first.token != second.token
    assert socket.gethostname() not in token and str(os.getpid()) not in token
    assert not second.try_lock()
    assert first.try_lock()  # the holder again: extended, so a lost reply can be repeated

    first.release_lock()  # a clean stop
    assert second.try_lock()
    assert not first.try_lock()

    # second stalls past its TTL: first takes the lock, and second can change nothing.
    wait_for(lambda: client.get(KEYS.db_writer_lock) is None, 5, "the lock's TTL")
    assert first.try_lock()
    with pytest.raises(LockLost):
        second.take(10)
    with pytest.raises(LockLost):
        second.ack(0, 0, [])
    second.forget_refresh()
    with pytest.raises(LockLost):
        second.refresh_lock()
    second.release_lock()
    assert client.get(KEYS.db_writer_lock).decode() == first.token
    assert client.llen(KEYS.items) == 1 and client.llen(KEYS.items_processing) == 0
    assert first.take(10) == [encode({"url": "http://l.test/1"})]


# --- newer wins -------------------------------------------------------------------------


def test_newer_wins(client: redis.Redis, redis_url: str, tmp_path: Path, database) -> None:
    def item(version: int, at: str) -> bytes:
        return encode({"url": "http://n.test/a", "v": version, "fetched_at": at})

    def stored() -> tuple[int, str]:
        _, data, scraped_at = database.rows()["http://n.test/a"]
        return data["v"], scraped_at

    def write(*entries: bytes) -> None:
        client.rpush(KEYS.items, *entries)
        done = run_writer(tmp_path, redis_url, database.url)
        assert done.returncode == 0, done.stderr

    jan2 = "2026-01-02T00:00:00.000000+00:00"
    write(item(2, jan2))
    assert stored() == (2, jan2)
    write(item(1, "2026-01-01T00:00:00+00:00"))  # an older fetch, replayed later
    assert stored() == (2, jan2)
    write(item(5, jan2))  # the same time in a later write: the later write wins
    assert stored() == (5, jan2)
    # In one batch: a tie (the later entry wins), then an older fetch.
    write(
        item(3, "2026-01-03T00:00:00+00:00"),
        item(4, "2026-01-03T00:00:00+00:00"),
        item(0, "2025-12-31T00:00:00+00:00"),
    )
    assert stored() == (4, "2026-01-03T00:00:00.000000+00:00")
