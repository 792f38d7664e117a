"""Items with identity in the database: types, keys, own tables, migration, several spiders.

Real processes: the db_writer as ``python -m spiders_project.db_writer``,
the session's private redis-server, SQLite and a temporary PostgreSQL.
Entries are made by the workers' own encoder (``item_buffer.buffer``).
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import threading
import uuid
from decimal import Decimal
from pathlib import Path

import psycopg
import pytest
import redis
import scrapy
from pytest_postgresql.janitor import DatabaseJanitor

from spiders_project.db_writer.db_url import DbUrl, parse_db_url
from spiders_project.db_writer.page_store import PageTable
from spiders_project.db_writer.sql_store import SqlStore
from spiders_project.db_writer.stores import open_store
from spiders_project.item_buffer.buffer import encode_entry
from spiders_project.keys import SPIDERS, RedisKeys
from spiders_project.keys.db_writers import lease
from spiders_project.keys.db_writers import writers as writers_of
from spiders_project.recrawl.config import RecrawlConfig
from tests.integration import test_db_writer as base
from tests.integration.test_db_writer import KEYS, Database, Writer, run_writer, wait_for
from tests.support.processes import items_in_hand

client = base.client
database = base.database
pg_database = base.pg_database
pg_server = base.pg_server
writers = base.writers


class ProductItem(scrapy.Item):
    sku = scrapy.Field()
    name = scrapy.Field()
    price = scrapy.Field()
    url = scrapy.Field()


@dataclasses.dataclass
class Review:
    stars: int
    text: str


AT = "2026-11-24T10:00:00.000000+00:00"
LATER = "2026-11-24T11:00:00.000000+00:00"


def product(sku: str, price: str, at: str = AT, **extra: object) -> bytes:
    item = ProductItem(sku=sku, name=f"P {sku}", price=Decimal(price), **extra)
    return encode_entry(item, "ProductItem", sku, at)


def test_items_have_types_keys_and_own_tables(
    client: redis.Redis, redis_url: str, tmp_path: Path, database: Database
) -> None:
    entries = [
        product("S1", "1.00", url="http://shop.test/p/1"),
        product("S2", "2.00"),
        # Two reviews from one page: one row each (position 0 and 1).
        encode_entry(Review(5, "good"), "Review", "fp1:0", AT),
        encode_entry(Review(1, "bad"), "Review", "fp1:1", AT),
        encode_entry({"any": "dict"}, "dict", "fp2:0", AT),
        # A newer fetch of S1 wins; an older replay of S2 changes nothing.
        product("S1", "1.50", at=LATER, url="http://shop.test/p/1"),
        product("S2", "0.50", at="2026-11-23T00:00:00+00:00"),
        # A key field the worker found empty: set aside with the worker's reason.
        encode_entry(
            ProductItem(name="no sku"),
            "ProductItem",
            None,
            AT,
            "ProductItem has no value for its key field 'sku' (ITEM_KEYS)",
        ),
    ]
    client.rpush(KEYS.items, *entries)
    done = run_writer(
        tmp_path, redis_url, database.url, "-s", 'ITEM_TABLES={"ProductItem": "products"}'
    )
    assert done.returncode == 0, done.stderr

    products = database.items("products")
    assert products == {
        ("distributed", "ProductItem", "S1"): (
            "http://shop.test/p/1",
            {"sku": "S1", "name": "P S1", "price": "1.50", "url": "http://shop.test/p/1"},
            LATER,
        ),
        ("distributed", "ProductItem", "S2"): (
            None,
            {"sku": "S2", "name": "P S2", "price": "2.00"},
            AT,
        ),
    }
    rest = database.items()
    assert rest == {
        ("distributed", "Review", "fp1:0"): (None, {"stars": 5, "text": "good"}, AT),
        ("distributed", "Review", "fp1:1"): (None, {"stars": 1, "text": "bad"}, AT),
        ("distributed", "dict", "fp2:0"): (None, {"any": "dict"}, AT),
    }
    [rejected] = client.lrange(KEYS.items_rejected, 0, -1)
    assert b'"name":"no sku"' in rejected
    assert "no value for its key field 'sku'" in done.stderr


def test_several_spiders_and_all_spiders(
    client: redis.Redis, redis_url: str, tmp_path: Path, database: Database
) -> None:
    names = ["shop_a", "shop_b", "shop_c"]
    for name in names:
        client.rpush(RedisKeys(name).items, product("S1", "1.00"), product("S2", "2.00"))
    done = run_writer(tmp_path, redis_url, database.url, "--spider", "shop_a", "--spider", "shop_b")
    assert done.returncode == 0, done.stderr
    assert {spider for spider, _, _ in database.items()} == {"shop_a", "shop_b"}
    assert client.llen(RedisKeys("shop_c").items) == 2  # not asked for

    # Workers add their spider to the set "spiders"; --all-spiders drains each.
    client.sadd(SPIDERS, *names)
    done = run_writer(tmp_path, redis_url, database.url, "--all-spiders")
    assert done.returncode == 0, done.stderr
    assert sorted(database.items()) == [
        (name, "ProductItem", sku) for name in names for sku in ("S1", "S2")
    ]
    for name in names:
        assert client.llen(RedisKeys(name).items) == items_in_hand(client, RedisKeys(name)) == 0
    client.delete(SPIDERS)


def test_all_spiders_picks_up_a_spider_that_appears_later(
    client: redis.Redis, redis_url: str, tmp_path: Path, database: Database, writers: list[Writer]
) -> None:
    writer = Writer(
        tmp_path, redis_url, database.url, "--all-spiders", "-s", "DB_WRITER_SPIDERS_POLL=0.2"
    )
    writers.append(writer)
    writer.wait_log("connected")
    client.rpush(RedisKeys("late").items, product("S9", "9.00"))
    client.sadd(SPIDERS, "late")
    try:
        wait_for(lambda: database.items(), 15, "the late spider's item")
        assert list(database.items()) == [("late", "ProductItem", "S9")]
        assert writer.stop() == 0
    finally:
        client.delete(SPIDERS)


# --- migration of the previous release's table ---------------------------------------

OLD_SQLITE = """
    CREATE TABLE items (
        url TEXT PRIMARY KEY, spider TEXT NOT NULL, data TEXT NOT NULL,
        scraped_at TEXT NOT NULL, written_at TEXT NOT NULL
    )
"""
OLD_POSTGRES = """
    CREATE TABLE items (
        url TEXT PRIMARY KEY, spider TEXT NOT NULL, data TEXT NOT NULL,
        scraped_at TIMESTAMPTZ NOT NULL, written_at TIMESTAMPTZ NOT NULL DEFAULT now()
    )
"""


def old_rows(n: int) -> list[tuple[str, str, str, str, str]]:
    return [
        (
            f"http://old.test/{i}",
            "distributed",
            json.dumps({"url": f"http://old.test/{i}", "v": "old"}),
            AT,
            AT,
        )
        for i in range(n)
    ]


def make_old_table(database: Database, tmp_path: Path, n: int) -> None:
    insert = "INSERT INTO items (url, spider, data, scraped_at, written_at) VALUES "
    if database.url.startswith("sqlite"):
        path = tmp_path / "data" / "items.db"
        path.parent.mkdir(parents=True, exist_ok=True)
        with sqlite3.connect(path) as conn:
            conn.execute(OLD_SQLITE)
            conn.executemany(insert + "(?, ?, ?, ?, ?)", old_rows(n))
        return
    with psycopg.connect(database.url) as conn:
        conn.execute(OLD_POSTGRES)
        with conn.cursor() as cursor:
            cursor.executemany(insert + "(%s, %s, %s, %s, %s)", old_rows(n))


def test_an_old_url_keyed_table_is_migrated_in_place(
    client: redis.Redis, redis_url: str, tmp_path: Path, database: Database
) -> None:
    make_old_table(database, tmp_path, 1000)
    # The new release's PageItem (ITEM_KEYS {"PageItem": ["url"]}) finds its old row,
    # and an entry an old worker left in the buffer does too.
    newer = {"url": "http://old.test/1", "v": "new", "fetched_at": LATER}
    client.rpush(
        KEYS.items,
        encode_entry(newer, "PageItem", "http://old.test/1", LATER),
        json.dumps({"url": "http://old.test/2", "v": "legacy", "fetched_at": LATER}).encode(),
        product("S1", "1.00"),
    )
    done = run_writer(tmp_path, redis_url, database.url)
    assert done.returncode == 0, done.stderr

    migrated = [line for line in done.stderr.splitlines() if "migrated table items" in line]
    assert len(migrated) == 1 and "1000 rows kept" in migrated[0], done.stderr
    rows = database.items()
    assert len(rows) == 1001
    assert rows["distributed", "PageItem", "http://old.test/0"] == (
        "http://old.test/0",
        {"url": "http://old.test/0", "v": "old"},
        AT,
    )
    assert rows["distributed", "PageItem", "http://old.test/1"][1]["v"] == "new"
    assert rows["distributed", "PageItem", "http://old.test/2"][1]["v"] == "legacy"
    assert rows["distributed", "ProductItem", "S1"][0] is None

    # Started again, nothing is migrated twice.
    done = run_writer(tmp_path, redis_url, database.url)
    assert done.returncode == 0 and "migrated" not in done.stderr, done.stderr
    if not database.url.startswith("sqlite"):
        with psycopg.connect(database.url) as conn:
            kind = conn.execute(
                "SELECT data_type FROM information_schema.columns"
                " WHERE table_name = 'items' AND column_name = 'data'"
            ).fetchone()
        assert kind == ("jsonb",)


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ('{"ProductItem": "Products; DROP TABLE items"}', "lower-case SQL identifier"),
        ('{"ProductItem": 3}', "must map item type names to table names"),
    ],
)
def test_a_bad_item_tables_setting_is_one_line(
    redis_url: str, tmp_path: Path, value: str, problem: str
) -> None:
    done = run_writer(tmp_path, redis_url, "sqlite:///data/x.db", "-s", f"ITEM_TABLES={value}")
    assert done.returncode == 2
    assert f"ITEM_TABLES={value!r}"[:12] in done.stderr and problem in done.stderr, done.stderr


def test_a_writer_thread_that_dies_stops_the_process_loudly(
    client: redis.Redis, redis_url: str, tmp_path: Path, database: Database
) -> None:
    """One spider's buffer is not a list: its writer dies, the process says so and exits 1."""
    client.rpush(RedisKeys("good").items, product("S1", "1.00"))
    client.set(RedisKeys("broken").items, "not a list")
    try:
        done = run_writer(
            tmp_path, redis_url, database.url, "--spider", "good", "--spider", "broken"
        )
    finally:
        client.delete(RedisKeys("broken").items)
    assert done.returncode == 1, done.stderr
    [line] = [x for x in done.stderr.splitlines() if "CRITICAL" in x]
    assert "the db_writer of broken needs" in line and "WRONGTYPE" in line, done.stderr
    # The other spider's writer was stopped warmly: it left the writers, its lease dropped.
    assert client.hlen(writers_of(RedisKeys("good"))) == 0
    assert not client.keys(lease(RedisKeys("good"), "*"))


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_writers_preparing_an_empty_database_at_once_all_start(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
):
    """Several db_writers (the tests run two; supervisor may start more) open a
    database whose tables do not exist yet at the same moment. PostgreSQL's
    ``CREATE TABLE IF NOT EXISTS`` is not safe against a concurrent one (the
    loser fails on pg_type's unique index), and SQLite turns a new file to WAL
    under a lock it does not wait for: each writer must wait for the other
    rather than fail to start. Six threads behind a barrier make the
    race likely; eight rounds, each on a new database."""
    for _ in range(8):
        if backend == "sqlite":
            url = f"sqlite:///{tmp_path / uuid.uuid4().hex}.db"
        else:
            server = request.getfixturevalue("pg_server")
            name = f"race_{uuid.uuid4().hex[:8]}"
            DatabaseJanitor(user="postgres", host=server.host, port=server.port, dbname=name).init()
            url = f"postgresql://postgres@{server.host}:{server.port}/{name}"
        assert prepare_at_once(parse_db_url(url), 6) == []


def prepare_at_once(db_url: DbUrl, writers: int) -> list[BaseException]:
    """Open the store and prepare its pages table in ``writers`` threads released
    together; what each raised."""
    start = threading.Barrier(writers)
    failures: list[BaseException] = []

    def prepare() -> None:
        start.wait(10)
        try:
            store = open_store(db_url, "shop")
            assert isinstance(store, SqlStore)
            PageTable(store, RecrawlConfig(after=60)).write([])
            store.close()
        except BaseException as exc:  # noqa: BLE001 (the caller reports them)
            failures.append(exc)

    threads = [threading.Thread(target=prepare) for _ in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    return failures
