"""Several db_writers on one item buffer: real processes, a real Redis, both databases.

Two ``python -m spiders_project.db_writer`` processes drain the same
``distributed:items`` at once: every item is stored once, newer wins across
them, and a writer killed with a batch in hand has that batch taken over by
the other once its lease (DB_WRITER_LOCK_TTL, short here) has expired.
Entries are in the workers' own form (``item_buffer.encode_entry``), each with
the time it left its worker's pipelines: that time, not the order in which
two writers happen to read them, says which of two versions is newer.
"""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import redis

from spiders_project.item_buffer.buffer import encode_entry
from spiders_project.keys import SPIDERS
from spiders_project.keys.db_writers import lease, processing_of
from spiders_project.keys.db_writers import writers as writers_of
from tests.integration import test_db_writer as base
from tests.integration.test_db_writer import (
    KEYS,
    Database,
    Writer,
    push_many,
    stat,
    wait_for,
)
from tests.support.processes import items_in_hand

# The db_writer tests' fixtures: Redis, SQLite and a temporary PostgreSQL.
client = base.client
database = base.database
pg_database = base.pg_database
pg_server = base.pg_server
writers = base.writers

START = datetime(2026, 12, 1, tzinfo=UTC)
# 60,000 entries over 50,000 urls: the last 10,000 urls come twice, the second
# time newer (version 1).
ENTRIES, URLS = 60_000, 50_000
# Short leases, so a dead writer's batch is taken over within seconds.
# Long enough that the batch the survivor is writing when it looks (up to a
# second on a loaded machine) is small beside it, as at the default 10 s.
TTL = 4.0


def entry(url: int, version: int, at: datetime) -> bytes:
    item = {"url": f"http://p.test/{url}", "v": version, "pad": "x" * 200}
    return encode_entry(item, "PageItem", item["url"], at.isoformat(timespec="microseconds"))


def versions(count: int, distinct: int) -> list[bytes]:
    """``count`` entries over ``distinct`` urls; entry i is url i % distinct,
    version i // distinct, its time i microseconds after START."""
    return [
        entry(i % distinct, i // distinct, START + timedelta(microseconds=i)) for i in range(count)
    ]


def writer_id(writer: Writer) -> str:
    """The id a writer's log says it joined with."""
    writer.wait_log("joined the db_writers of distributed:items as ")
    found = re.search(r"joined the db_writers of distributed:items as (\w+)", writer.log())
    assert found, writer.log()
    return found.group(1)


def written_by(writer: Writer) -> int:
    """The items a stopped writer says it wrote."""
    found = re.search(r"(\d+) items written in \d+ batches; stopped", writer.log())
    assert found, writer.log()
    return int(found.group(1))


def counts(database: Database) -> tuple[int, int, int]:
    """Rows, distinct urls among them, and rows holding version 1."""
    rows = database.rows()
    total, distinct = database.read("SELECT count(*), count(DISTINCT url) FROM items")[0]
    newer = sum(1 for _, data, _ in rows.values() if data["v"] == 1)
    return int(total), int(distinct), newer


def version_of(database: Database, url: str) -> int | None:
    row = database.rows().get(url)
    return row[1]["v"] if row else None


def drained(client: redis.Redis) -> bool:
    return client.llen(KEYS.items) == 0 and items_in_hand(client) == 0


@contextmanager
def stopped(writer: Writer) -> Iterator[None]:
    """``writer`` paused (SIGSTOP) for the block, resumed after it."""
    os.kill(writer.process.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(writer.process.pid, signal.SIGCONT)


def test_two_writers_drain_one_buffer_and_store_every_item_once(
    database: Database, client: redis.Redis, redis_url: str, tmp_path: Path, writers: list[Writer]
) -> None:
    client.sadd(SPIDERS, "distributed")
    batches = ("-s", "DB_WRITER_BATCH_SIZE=500", "-s", "DB_WRITER_MAX_WAIT=0.05")
    # One names the spider, the other writes every spider: both take from the buffer.
    first = Writer(tmp_path, redis_url, database.url, "--all-spiders", *batches)
    second = Writer(tmp_path, redis_url, database.url, "--spider", "distributed", *batches)
    writers += [first, second]
    ids = {writer_id(first), writer_id(second)}
    assert len(ids) == 2

    push_many(client, KEYS.items, versions(ENTRIES, URLS))
    holding: set[str] = set()  # the writers seen with a batch in hand

    def done() -> bool:
        held = client.hgetall(writers_of(KEYS))
        holding.update(name.decode() for name, n in held.items() if int(n))
        return drained(client)

    wait_for(done, 90, "the buffer to drain")
    assert first.stop() == 0 and second.stop() == 0

    assert counts(database) == (URLS, URLS, ENTRIES - URLS)  # once each, newer wins
    assert holding == ids  # both took batches
    shares = written_by(first), written_by(second)
    assert min(shares) > 0 and sum(shares) == ENTRIES == stat(client, "items_written"), shares
    assert client.hlen(writers_of(KEYS)) == 0 and not client.keys(lease(KEYS, "*"))
    for writer in (first, second):
        assert "Traceback" not in writer.log() and "ERROR" not in writer.log(), writer.log()
    client.delete(SPIDERS)


def test_a_killed_writers_batch_is_taken_over_within_its_lease_ttl(
    database: Database, client: redis.Redis, redis_url: str, tmp_path: Path, writers: list[Writer]
) -> None:
    settings = ("-s", f"DB_WRITER_LOCK_TTL={TTL}", "-s", "DB_WRITER_BATCH_SIZE=1000")
    settings += ("-s", "DB_WRITER_MAX_WAIT=0.05")
    victim = Writer(tmp_path, redis_url, database.url, *settings)
    survivor = Writer(tmp_path, redis_url, database.url, *settings)
    writers += [victim, survivor]
    victim_id, survivor_id = writer_id(victim), writer_id(survivor)
    push_many(client, KEYS.items, versions(ENTRIES, URLS))

    # Mid-batch: stopped while its processing list holds a batch it has not acknowledged.
    held = 0
    deadline = time.monotonic() + 30
    while not held:
        assert time.monotonic() < deadline, "the victim never held a batch"
        os.kill(victim.process.pid, signal.SIGSTOP)
        held = client.llen(processing_of(KEYS, victim_id))
        if not held:
            os.kill(victim.process.pid, signal.SIGCONT)
            time.sleep(0.005)
    stopped_at = time.monotonic()
    victim.process.send_signal(signal.SIGKILL)
    victim.process.wait(10)
    assert not drained(client), "the buffer drained before the kill"

    # Its lease expires half the TTL after its last renewal; the survivor looks
    # every fifth of the TTL, between its batches: taken over within the TTL.
    wait_for(lambda: not client.hexists(writers_of(KEYS), victim_id), 4 * TTL, "the takeover")
    taken_over = time.monotonic() - stopped_at
    assert not client.exists(processing_of(KEYS, victim_id))
    wait_for(lambda: drained(client), 90, "the buffer to drain")
    assert survivor.stop() == 0

    print(f"killed holding {held} entries; taken over {taken_over:.2f} s later (TTL {TTL} s)")
    assert taken_over <= TTL, taken_over
    log = survivor.log()
    assert f"took over {held} entries of db_writer {victim_id}, whose lease is gone" in log, log
    assert counts(database) == (URLS, URLS, ENTRIES - URLS)  # nothing lost, none twice
    assert stat(client, "items_written") >= ENTRIES  # at least once: a replay is an upsert
    assert client.hkeys(writers_of(KEYS)) == [] and "Traceback" not in log
    assert survivor_id != victim_id


@contextmanager
def database_locked(database: Database, tmp_path: Path) -> Iterator[None]:
    """Every write to the items table waits for the block's end (SQLite: the
    file's write lock; PostgreSQL: the table locked by another session)."""
    if database.url.startswith("sqlite"):
        conn = sqlite3.connect(tmp_path / "data" / "items.db", isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        finally:
            conn.execute("ROLLBACK")
            conn.close()
        return
    with psycopg.connect(database.url) as pg, pg.transaction():
        pg.execute("LOCK TABLE items IN ACCESS EXCLUSIVE MODE")
        yield


def test_an_older_version_written_after_a_newer_one_by_another_writer_does_not_win(
    database: Database, client: redis.Redis, redis_url: str, tmp_path: Path, writers: list[Writer]
) -> None:
    """The race: one writer takes the older version of an item and is held up
    before its commit; the other takes the newer one and commits it; then the
    first commits the older one. The row keeps the newer."""
    slow = Writer(tmp_path, redis_url, database.url, "-s", "DB_WRITER_MAX_WAIT=0")
    fast = Writer(tmp_path, redis_url, database.url, "-s", "DB_WRITER_MAX_WAIT=0")
    writers += [slow, fast]
    slow_id, fast_id = writer_id(slow), writer_id(fast)
    older, newer = entry(7, 1, START), entry(7, 2, START + timedelta(seconds=1))

    with stopped(fast):
        with database_locked(database, tmp_path):
            client.rpush(KEYS.items, older)
            wait_for(lambda: client.hget(writers_of(KEYS), slow_id) == b"1", 10, "slow's take")
            time.sleep(0.3)  # its write waits for the lock
            os.kill(slow.process.pid, signal.SIGSTOP)
        # The lock is gone; slow holds the older version, paused before its commit.
        client.rpush(KEYS.items, newer)
    try:
        wait_for(lambda: version_of(database, "http://p.test/7") == 2, 15, "fast's commit")
        # Its ack follows its commit: on a loaded machine, a moment later.
        wait_for(lambda: client.hget(writers_of(KEYS), fast_id) == b"0", 5, "fast's ack")
    finally:
        os.kill(slow.process.pid, signal.SIGCONT)
    wait_for(lambda: drained(client), 20, "slow's commit and ack")

    assert slow.stop() == 0 and fast.stop() == 0
    assert written_by(slow) == written_by(fast) == 1  # each wrote its version
    _, data, scraped_at = database.rows()["http://p.test/7"]
    assert data["v"] == 2 and scraped_at == "2026-12-01T00:00:01.000000+00:00"
    assert stat(client, "items_written") == 2
