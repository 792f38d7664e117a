"""The `pages` table: page-state entries into rows, newer wins, and revisits pushed back once.

Real processes: the db_writer as ``python -m spiders_project.db_writer``, the
session's private redis-server, SQLite and a temporary PostgreSQL. Entries
are made by the workers' own encoder (``recrawl.pages_row.page_entry``).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import psycopg
import redis

from spiders_project.item_buffer.buffer import encode_entry
from spiders_project.recrawl.pages_row import page_entry
from spiders_project.scope.seeds import parse_seed
from tests.integration import test_db_writer as base
from tests.integration.test_db_writer import KEYS, Database, Writer, run_writer, wait_for

client = base.client
database = base.database
pg_database = base.pg_database
pg_server = base.pg_server
writers = base.writers

T0 = datetime(2026, 11, 24, 10, 0, tzinfo=UTC)
A, B, C = (f"https://example.com/p/{n}" for n in range(3))
AFTER = 100_000_000
COLUMNS = "url, job, status, outcome, etag, digest, changes, failures, revisit_interval, next_due"


def at(seconds: float) -> str:
    return (T0 + timedelta(seconds=seconds)).isoformat(timespec="microseconds")


def pages(database: Database) -> dict[str, tuple[Any, ...]]:
    """url -> the row's columns after url, times as aware datetimes."""
    found = database.read(f"SELECT {COLUMNS} FROM pages")
    return {row[0]: tuple(_time(v) for v in row[1:]) for row in found}


def _time(value: Any) -> Any:
    if isinstance(value, str) and value.startswith("20") and "T" in value:
        return datetime.fromisoformat(value)
    return value


def seed_urls(client: redis.Redis) -> list[str]:
    return [parse_seed(raw).url for raw in client.lrange(KEYS.start_urls, 0, -1)]


def test_page_entries_become_one_row_per_url_newer_wins(
    database: Database, client: redis.Redis, redis_url: str, tmp_path: Path
):
    # An interval of about three years: due times in the future, so the revisit
    # scheduler leaves them alone.
    settings = ("-s", f"RECRAWL_AFTER={AFTER}")
    client.rpush(
        KEYS.items,
        page_entry(A, "default", at(0), "fetched", status=200, etag='"a1"', digest="sha1:A1"),
        page_entry(B, "job-1", at(0), "fetched", status=200, digest="sha1:B1"),
        page_entry(C, "default", at(0), "fetch_error"),
        b'{"kind": "page", "url": "https://example.com/x", "outcome": "eaten"}',
    )
    done = run_writer(tmp_path, redis_url, database.url, *settings)
    assert done.returncode == 0, done.stderr
    assert "unknown outcome 'eaten'" in done.stderr
    assert client.llen(KEYS.items_rejected) == 1
    first = pages(database)
    assert set(first) == {A, B, C}
    assert first[A][:7] == ("default", 200, "fetched", '"a1"', "sha1:A1", 0, 0)
    assert first[A][7:] == (AFTER, T0 + timedelta(seconds=AFTER))
    assert first[B][0] == "job-1"
    assert first[C][:3] == ("default", None, "fetch_error") and first[C][6] == 1

    client.rpush(
        KEYS.items,
        # A changed.
        page_entry(A, "default", at(100), "fetched", status=200, etag='"a2"', digest="sha1:A2"),
        # B answered 304 to its revisit: validators and digest kept.
        page_entry(B, "job-1", at(100), "not_modified", status=304),
        # C: a second failure in a row.
        page_entry(C, "default", at(100), "blocked", status=403),
    )
    done = run_writer(tmp_path, redis_url, database.url, *settings)
    assert done.returncode == 0, done.stderr
    assert client.llen(KEYS.start_urls) == 0, "nothing was due"
    rows = pages(database)
    assert rows[A][:7] == ("default", 200, "fetched", '"a2"', "sha1:A2", 1, 0)
    assert rows[A][8] == T0 + timedelta(seconds=100 + AFTER)
    assert rows[B][1:7] == (304, "not_modified", None, "sha1:B1", 0, 0)
    assert rows[C][1:3] == (403, "blocked") and rows[C][6] == 2
    # An entry replayed (an acknowledgement Redis lost), and an older fetch of A
    # arriving late: nothing moves, no change is counted twice.
    client.rpush(
        KEYS.items,
        page_entry(A, "default", at(100), "fetched", status=200, etag='"a2"', digest="sha1:A2"),
        page_entry(A, "default", at(50), "fetched", status=200, etag='"a0"', digest="sha1:A0"),
    )
    assert run_writer(tmp_path, redis_url, database.url, *settings).returncode == 0
    assert pages(database) == rows


def test_due_pages_are_pushed_back_once_with_their_validators_by_two_db_writers(
    database: Database,
    client: redis.Redis,
    redis_url: str,
    tmp_path: Path,
    writers: list[Writer],
):
    urls = [f"https://example.com/d/{n}" for n in range(40)]
    # Fetched two hours ago with RECRAWL_AFTER of a minute: all due now.
    past = (datetime.now(UTC) - timedelta(hours=2)).isoformat()
    client.rpush(
        KEYS.items,
        *(
            page_entry(u, "default", past, "fetched", status=200, etag=f'"{i}"', digest="sha1:X")
            for i, u in enumerate(urls)
        ),
    )
    settings = ("-s", "RECRAWL_AFTER=60", "-s", "RECRAWL_SCHEDULE_BATCH=15")
    writers += [Writer(tmp_path, redis_url, database.url, *settings) for _ in range(2)]
    # Both write and both schedule: the due rows each reads are locked as read.
    wait_for(
        lambda: all("joined the db_writers" in w.log() for w in writers),
        30,
        "both writers to join",
    )
    wait_for(lambda: client.llen(KEYS.start_urls) >= len(urls), 30, "the revisits")
    # Two more looks of the scheduler, each proved by a probe page due after the
    # 40 (fetched later): the look that pushes a probe takes the earliest due
    # rows first, so any of the 40 still due would have been pushed again before it.
    for n in range(2):
        probe = f"https://example.com/probe/{n}"
        fetched = (datetime.now(UTC) - timedelta(hours=2)).isoformat()
        client.rpush(KEYS.items, page_entry(probe, "default", fetched, "fetched", status=200))
        wait_for(lambda url=probe: url in seed_urls(client), 30, f"the scheduler to push {probe}")
    pushed = [parse_seed(raw) for raw in client.lrange(KEYS.start_urls, 0, -1)]
    pushed = [seed for seed in pushed if "/probe/" not in seed.url]
    assert sorted(seed.url for seed in pushed) == sorted(urls), "each due URL once"
    for seed in pushed:
        assert seed.revisit is not None
        assert seed.revisit["etag"] == f'"{urls.index(seed.url)}"'
        assert seed.revisit["digest"] == "sha1:X"
        assert seed.revisit["interval"] == 60.0
        assert seed.job == "default"
    now = datetime.now(UTC)
    dues = [row[8] for row in pages(database).values()]
    assert all(now < due < now + timedelta(seconds=61) for due in dues), dues
    assert all(orjson.loads(raw)["revisit"] for raw in client.lrange(KEYS.start_urls, 0, -1))
    assert len(seed_urls(client)) == len(urls) + 2, "each probe once"


def test_revisits_refused_by_a_full_redis_stay_due_and_items_still_go_in(
    database: Database, start_redis, tmp_path: Path, writers: list[Writer]
):
    _, url = start_redis()
    client = redis.Redis.from_url(url)
    past = (datetime.now(UTC) - timedelta(hours=2)).isoformat()
    urls = [f"https://example.com/r/{n}" for n in range(5)]
    client.rpush(KEYS.items, *(page_entry(u, "default", past, "fetched") for u in urls))
    client.rpush(KEYS.items, encode_entry({"url": "https://example.com/i"}, "dict", "k", past))
    # Full (noeviction): every write is refused but the db_writer's allow-oom scripts.
    client.config_set("maxmemory-policy", "noeviction")
    client.config_set("maxmemory", "1")
    writer = Writer(tmp_path, url, database.url, "-s", "RECRAWL_AFTER=60")
    writers.append(writer)
    writer.wait_log("revisits: cannot push the due pages")
    wait_for(lambda: database.items(), 15, "the item written while Redis is full")
    now = datetime.now(UTC)
    assert set(pages(database)) == set(urls)
    assert all(row[8] < now for row in pages(database).values()), "still due"
    client.config_set("maxmemory", "0")
    wait_for(lambda: client.llen(KEYS.start_urls) == len(urls), 15, "the revisits pushed")
    writer.wait_log("revisits: pushing due pages again")
    log = writer.log()
    assert log.count("revisits: cannot push") == 1, "said once"
    assert "cannot read the due pages" not in log
    client.close()


def test_postgresql_pages_with_an_altered_column_still_take_rows(
    pg_database: Database, client: redis.Redis, redis_url: str, tmp_path: Path
):
    """The binary COPY goes into columns of its own types, then a cast: a column an
    operator altered (status as smallint, a wider interval) takes the rows, on
    the first fetch and on the next, whose lookup finds the row by its key."""
    settings = ("-s", f"RECRAWL_AFTER={AFTER}")
    client.rpush(KEYS.items, page_entry(A, "default", at(0), "fetched", status=200, digest="d1"))
    assert run_writer(tmp_path, redis_url, pg_database.url, *settings).returncode == 0
    with psycopg.connect(pg_database.url, autocommit=True) as conn:
        conn.execute("ALTER TABLE pages ALTER COLUMN status TYPE smallint")
        conn.execute("ALTER TABLE pages ALTER COLUMN revisit_interval TYPE numeric")
    client.rpush(
        KEYS.items,
        page_entry(A, "default", at(10), "fetched", status=200, digest="d2"),
        page_entry(B, "default", at(10), "fetched", status=404),
    )
    done = run_writer(tmp_path, redis_url, pg_database.url, *settings)
    assert done.returncode == 0, done.stderr
    assert client.llen(KEYS.items_rejected) == 0, done.stderr
    rows = pages(pg_database)
    assert rows[A][1:6] == (200, "fetched", None, "d2", 1)  # a change, against the stored row
    assert rows[B][1] == 404
