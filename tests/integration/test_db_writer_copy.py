"""PostgreSQL: batches of new items COPYed into their tables, the others upserted.

The store itself against a temporary PostgreSQL (the module's cluster of
``test_db_writer``): which batches take which path, and that newer-wins
and all-or-nothing hold on both, also when a COPY meets a row another
db_writer has not committed yet.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import psycopg
import pytest

from spiders_project.db_writer.db_url import parse_db_url
from spiders_project.db_writer.entries import Row, parse_entries
from spiders_project.db_writer.sql_store import RowsRefused
from spiders_project.db_writer.stores import PostgresStore, open_store
from spiders_project.item_buffer.buffer import encode_entry
from tests.integration import test_db_writer as base
from tests.integration.test_db_writer import Database

pg_database = base.pg_database
pg_server = base.pg_server

EARLY = "2026-11-24T10:00:00.000000+00:00"
AT = "2026-11-24T11:00:00.000000+00:00"
LATE = "2026-11-24T12:00:00.000000+00:00"
TABLES = {"ProductItem": "products"}


def rows(*items: tuple[str, str, int, str]) -> list[Row]:
    """Rows of (item type, key, version, scraped at), as the writer parses them."""
    entries = [
        encode_entry({"url": f"http://s.test/{key}", "v": version}, item_type, key, at)
        for item_type, key, version, at in items
    ]
    parsed, rejected = parse_entries(entries, TABLES)
    assert not rejected
    return parsed


def store_of(database: Database) -> PostgresStore:
    store = open_store(parse_db_url(database.url), "shop")
    assert isinstance(store, PostgresStore)
    return store


def copies_of(store: PostgresStore) -> list[bool]:
    """What each COPY the store tries comes to (True: the batch went in), as it goes."""
    outcomes: list[bool] = []
    insert = store._insert

    def recorded(conn: psycopg.Connection, batch: Sequence[Row]) -> bool:
        outcomes.append(insert(conn, batch))
        return outcomes[-1]

    store._insert = recorded  # type: ignore[method-assign]
    return outcomes


def versions(database: Database, table: str = "items") -> dict[str, tuple[int, str]]:
    """key -> (version, scraped_at) of ``table``."""
    return {key[2]: (data["v"], at) for key, (_, data, at) in database.items(table).items()}


def test_new_batches_are_copied_and_the_others_upserted_newer_wins(
    pg_database: Database,
) -> None:
    store = store_of(pg_database)
    copies = copies_of(store)
    store.write_batch(rows(("PageItem", "a", 1, AT), ("PageItem", "b", 1, AT)))
    assert copies == [True]  # new rows only: COPYed

    # b again, older; a again, newer; c new: the COPY meets a and b, nothing of it stays.
    store.write_batch(
        rows(("PageItem", "c", 1, AT), ("PageItem", "b", 2, EARLY), ("PageItem", "a", 2, LATE))
    )
    assert copies == [True, False]
    assert versions(pg_database) == {"a": (2, LATE), "b": (1, AT), "c": (1, AT)}

    store.write_batch(rows(("PageItem", "d", 1, AT), ("PageItem", "c", 2, LATE)))
    assert copies == [True, False]  # not tried after a miss: upserted
    store.write_batch(rows(("PageItem", "e", 1, AT)))
    assert copies == [True, False, True]  # tried again, and new: COPYed
    found = pg_database.read("SELECT item_key, count(*) FROM items GROUP BY item_key")
    assert dict(found) == {"a": 1, "b": 1, "c": 1, "d": 1, "e": 1}
    assert versions(pg_database)["c"] == (2, LATE)
    written = pg_database.read("SELECT count(*) FROM items WHERE written_at > scraped_at")
    assert written == [(5,)]  # both paths stamp the server's now()
    store.close()


def test_a_time_python_cannot_read_is_a_refused_row(pg_database: Database) -> None:
    """The binary COPY sends scraped_at as a number; a canonical-looking time that is
    none (fullwidth digits match the check's \\d) is refused, not a crash."""
    store = store_of(pg_database)
    good = rows(("PageItem", "a", 1, AT))[0]
    bad = good._replace(item_key="b", scraped_at="２０２６" + AT[4:])
    with pytest.raises(RowsRefused):
        store.write_batch([good, bad])
    store.write_batch([good])
    assert versions(pg_database) == {"a": (1, AT)}
    store.close()


def test_a_copy_into_several_tables_is_all_or_nothing(pg_database: Database) -> None:
    store = store_of(pg_database)
    copies = copies_of(store)
    store.write_batch(rows(("ProductItem", "p1", 1, AT)))
    # The items row is new, the products row is not: the items row must not be
    # written twice (the rolled-back COPY, then the upsert).
    store.write_batch(rows(("PageItem", "a", 1, AT), ("ProductItem", "p1", 2, LATE)))
    assert copies == [True, False]
    assert versions(pg_database) == {"a": (1, AT)}
    assert versions(pg_database, "products") == {"p1": (2, LATE)}
    store.close()


def test_a_copy_meeting_another_writers_uncommitted_row_waits_then_upserts(
    pg_database: Database,
) -> None:
    """Two db_writers of the same spider run only one at a time (the lock), but
    spiders sharing a table, or a writer whose lock expired, may write the same
    identity at once: the COPY waits on the other transaction's key, then the
    batch is upserted, so the newer item wins whichever commits first."""
    store = store_of(pg_database)
    copies = copies_of(store)
    other = psycopg.connect(parse_db_url(pg_database.url).conninfo)
    other.execute(  # the same identity as store's item, fetched earlier, not committed
        "INSERT INTO items (spider, item_type, item_key, url, data, scraped_at)"
        " VALUES ('shop', 'PageItem', 'x', 'http://s.test/x', '{\"v\": 1}', %s)",
        (EARLY,),
    )
    done = threading.Event()
    failures: list[BaseException] = []

    def write() -> None:
        try:
            store.write_batch(rows(("PageItem", "y", 1, AT), ("PageItem", "x", 2, AT)))
        except BaseException as exc:  # noqa: BLE001 (reported below)
            failures.append(exc)
        done.set()

    thread = threading.Thread(target=write)
    thread.start()
    assert not done.wait(1.0), "the COPY did not wait for the other transaction"
    other.commit()
    thread.join(10)
    other.close()
    assert done.is_set() and not failures, failures
    assert copies == [False]
    assert versions(pg_database) == {"x": (2, AT), "y": (1, AT)}
    store.close()
