"""The db_writer against Redis refusing writes (OOM, READONLY), its lease, and newer-wins.

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

from spiders_project.db_writer.item_queue import ItemQueue, LeaseLost, Taken
from spiders_project.keys.db_writers import filling, lease, processing_of
from spiders_project.keys.db_writers import writers as writers_of
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
from tests.support.processes import items_in_hand

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
    urls = push_items(client, 6000, "http://oom.test/")
    full = used_memory(client)
    # Under the memory in use, by half of what the items take: Redis stays full
    # until the writer has drained about half of them. Half of 6,000 items
    # (about 800 KB) leaves room for what Redis keeps after the drain: about
    # 25 KB per command at its first call (its latency histogram), and the
    # writer's scripts call about a dozen.
    make_oom(client, (empty + full) // 2)
    db = sqlite_database(tmp_path)

    done = run_writer(tmp_path, redis_url, db.url, "-s", "DB_WRITER_BATCH_SIZE=100")

    assert done.returncode == 0, done.stderr
    assert set(db.rows()) == urls
    assert client.llen(KEYS.items) == 0 and items_in_hand(client) == 0
    assert stat(client, "items_written") == 6000 and stat(client, "batches") == 60
    # It joined the writers under OOM, and left them at its stop.
    assert "joined the db_writers" in done.stderr
    assert client.hlen(writers_of(KEYS)) == 0 and not client.keys("*lease*")
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
    assert client.llen(KEYS.items) + items_in_hand(client) > 0
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
    assert client.llen(KEYS.items) == items_in_hand(client) == 0


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
    assert client.llen(KEYS.items) == items_in_hand(client) == 0


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
    ttl = ("-s", "DB_WRITER_LOCK_TTL=2")
    writer = Writer(tmp_path, redis_url, db.url, "-s", "DB_WRITER_BATCH_SIZE=50", *ttl)
    writers.append(writer)
    writer.wait_log("connected")
    # Hold SQLite's write lock so the batch is taken but not committed yet.
    blocker = sqlite3.connect(tmp_path / "data" / "items.db", isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        urls = push_items(client, 50, "http://h.test/")
        wait_for(lambda: items_in_hand(client) == 50, 10, "the batch taken")
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
    assert items_in_hand(client) == 50  # committed, not acknowledged
    client.execute_command("REPLICAOF", "NO", "ONE")

    # Its lease could not be dropped (Redis refused writes): the next writer
    # takes the batch over once it expires.
    done = run_writer(tmp_path, redis_url, db.url, *ttl)
    assert done.returncode == 0, done.stderr
    assert "took over 50 entries of db_writer" in done.stderr
    assert set(db.rows()) == urls
    assert items_in_hand(client) == 0
    assert stat(client, "items_written") == 50  # the refused ack never counted


# --- the writers and their leases ---------------------------------------------------------


def test_writers_are_known_by_an_id_and_take_over_a_gone_ones_batch(
    client: redis.Redis, redis_url: str
) -> None:
    """Two queues in one process (one hostname, one pid, as replicas in containers)."""
    state = RedisState(redis_url, 0.05, 0.2, logging.getLogger("test"))
    first = ItemQueue(SyncRedisCalls(client, state), KEYS, lease_ttl=0.5)
    second = ItemQueue(SyncRedisCalls(client, state), KEYS, lease_ttl=0.5)
    items = [encode({"url": f"http://l.test/{i}"}) for i in range(3)]
    client.rpush(KEYS.items, *items)
    [buffer] = first.buffers

    assert first.join() == second.join() == 0
    assert first.writer != second.writer
    for writer in (first.writer, second.writer):
        assert socket.gethostname() not in writer and str(os.getpid()) not in writer

    def held() -> dict[str, int]:
        return {k.decode(): int(v) for k, v in client.hgetall(writers_of(KEYS)).items()}

    assert held() == {first.writer: 0, second.writer: 0}
    # Each takes its own entries, into its own list.
    assert first.take(buffer, 1).entries == items[:1]
    assert second.take(buffer, 1).entries == items[1:2]
    assert held() == {first.writer: 1, second.writer: 1}
    assert client.lrange(processing_of(KEYS, second.writer), 0, -1) == items[1:2]

    # second's lease lives: nothing to take over.
    assert first.take_over_gone(now=True) == 0
    # second stalls past its lease, then comes back before anyone looked: it renews it.
    wait_for(lambda: client.get(lease(KEYS, second.writer)) is None, 5, "second's lease TTL")
    second.forget_heartbeat()
    second.heartbeat()
    assert client.get(lease(KEYS, second.writer)) == second.writer.encode()
    assert first.take_over_gone(now=True) == 0

    # It stalls again; this time first looks, and takes its batch over, after its own.
    wait_for(lambda: client.get(lease(KEYS, second.writer)) is None, 5, "second's lease TTL")
    assert first.take_over_gone(now=True) == 1
    assert client.lrange(processing_of(KEYS, first.writer), 0, -1) == items[:2]
    assert not client.exists(processing_of(KEYS, second.writer))
    assert held() == {first.writer: 2}
    # second, back, can change nothing.
    with pytest.raises(LeaseLost):
        second.take(buffer, 10)
    with pytest.raises(LeaseLost):
        second.ack(buffer, items[2:3], 1, [])
    second.forget_heartbeat()
    with pytest.raises(LeaseLost):
        second.heartbeat()
    assert client.llen(KEYS.items) == 1 and held() == {first.writer: 2}

    # A batch the list does not start with is refused, changing nothing.
    assert first.ack(buffer, items[1:2], 1, []) is False
    assert held() == {first.writer: 2}
    assert first.ack(buffer, items[:2], 2, []) is True
    assert held() == {first.writer: 0}
    # second joins again, as its writer does after LeaseLost, and takes what is left.
    assert second.join() == 0
    assert second.take(buffer, 10).entries == items[2:]

    # A clean stop: out of the hash, lease dropped; with entries left (second),
    # the hash keeps its count and the lease goes, so a look takes them over at once.
    assert first.leave() == 0 and second.leave() == 1
    assert held() == {second.writer: 1}
    assert not client.exists(lease(KEYS, first.writer), lease(KEYS, second.writer))
    assert first.join() == 0
    assert first.take_over_gone(now=True) == 1
    assert held() == {first.writer: 1}


def test_a_writer_filling_a_batch_has_the_buffer_to_itself(
    client: redis.Redis, redis_url: str
) -> None:
    """A trickle of items is taken by the writer that started a batch from it,
    not split between writers into twice the takes and half-full batches."""
    state = RedisState(redis_url, 0.05, 0.2, logging.getLogger("test"))
    first = ItemQueue(SyncRedisCalls(client, state), KEYS, lease_ttl=5)
    second = ItemQueue(SyncRedisCalls(client, state), KEYS, lease_ttl=5)
    first.join()
    second.join()
    [buffer] = first.buffers
    items = [encode({"url": f"http://f.test/{i}"}) for i in range(12)]

    client.rpush(KEYS.items, *items[:2])
    # Fewer than a batch: first marks the buffer as its own to fill, for 5 s.
    assert first.take(buffer, 10, fill_for=5).entries == items[:2]
    assert client.get(filling(KEYS)) == first.writer.encode()
    client.rpush(KEYS.items, items[2])
    assert second.take(buffer, 10, fill_for=5) == Taken([], others_filling=True)
    assert client.llen(KEYS.items) == 1
    client.rpush(KEYS.items, *items[3:])
    assert first.take(buffer, 8).entries == items[2:10]  # its batch is full: the mark goes
    assert not client.exists(filling(KEYS))
    assert second.take(buffer, 10, fill_for=5).entries == items[10:]
    assert client.get(filling(KEYS)) == second.writer.encode()
    # A writer with no time to fill a batch (DB_WRITER_MAX_WAIT=0) never marks one.
    client.delete(filling(KEYS))
    client.rpush(KEYS.items, items[0])
    assert first.take(buffer, 10).entries == items[:1] and not client.exists(filling(KEYS))


def test_the_previous_releases_list_is_taken_over_once_its_lock_is_gone(
    client: redis.Redis, redis_url: str
) -> None:
    state = RedisState(redis_url, 0.05, 0.2, logging.getLogger("test"))
    queue = ItemQueue(SyncRedisCalls(client, state), KEYS, lease_ttl=5)
    old = [encode({"url": "http://o.test/1"}), encode({"url": "http://o.test/2"})]
    client.rpush(KEYS.items_processing, *old)
    client.set(KEYS.db_writer_lock, "a-writer-of-the-previous-release", px=60_000)
    queue.join()
    assert queue.take_over_gone(now=True) == 0  # its writer may still append to it
    client.delete(KEYS.db_writer_lock)
    assert queue.take_over_gone(now=True) == 2
    assert client.lrange(processing_of(KEYS, queue.writer), 0, -1) == old
    assert not client.exists(KEYS.items_processing)
    assert client.hget(writers_of(KEYS), queue.writer) == b"2"


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
