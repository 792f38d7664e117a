"""The two databases the db_writer can fill: SQLite and PostgreSQL.

Both keep one table, ``items``, keyed by url, and write a batch as one
upsert in one transaction, so a replayed item updates its row instead of
adding one. Newer wins: a row is replaced only by an item whose
``scraped_at`` is not older (ISO-8601 UTC text in SQLite, in one format, so
text order is time order), so a late replay of an older fetch changes nothing.

Driver errors leave a store as one of two exceptions, because
the writer must treat them differently:

- :class:`StoreUnavailable`: the database cannot take writes now (down,
  locked, disk full, table altered); the same rows are retried later.
- :class:`RowsRefused`: the database refused a value in these rows; the same
  rows would fail forever, so the writer isolates and rejects them.

A store reconnects by itself on the next write after a failure.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import psycopg
import psycopg.conninfo
import psycopg.errors

from spiders_project.db_writer.db_url import SQLITE, DbUrl
from spiders_project.db_writer.entries import Row, utc_now_iso

logger = logging.getLogger(__name__)

# Seconds SQLite waits for the write lock held by another connection (in WAL
# mode only another writer, such as an operator's shell, holds it) before the
# write counts as failed and is retried with backoff. Short, because signals
# are only handled between database calls.
SQLITE_BUSY_TIMEOUT = 2.0
# libpq options used unless DB_URL sets them: fail a connect in 10 s, notice
# a vanished server within about a minute, and give up on a write blocked for
# a minute (by another session's row locks, say) so it is logged and retried.
PG_CONNECT_DEFAULTS = {
    "connect_timeout": "10",
    "options": "-c statement_timeout=60000",
    "keepalives": "1",
    "keepalives_idle": "30",
    "keepalives_interval": "10",
    "keepalives_count": "3",
    "application_name": "db_writer",
}


class StoreUnavailable(Exception):
    """The database cannot take this batch now; the same rows may succeed later."""


class RowsRefused(Exception):
    """The database refused a value in these rows; retrying them cannot succeed."""


class Store(Protocol):
    """What the writer needs from a database."""

    def write_batch(self, rows: Sequence[Row]) -> None:
        """Upsert ``rows`` (distinct urls) in one transaction, or raise and write none."""

    def close(self) -> None:
        """Release the connection; a later write reconnects."""


def one_line(exc: BaseException) -> str:
    """An exception as ``Type: message`` on a single line (libpq messages span several)."""
    return f"{type(exc).__name__}: {' '.join(str(exc).split())}"


def open_store(db_url: DbUrl, spider: str) -> Store:
    """Connect to the database of ``db_url`` and create the table if missing.

    Raises :class:`StoreUnavailable` when that fails, so the caller can say so
    on one line.
    """
    if db_url.backend == SQLITE:
        assert db_url.path is not None
        return SqliteStore(db_url.path, spider)
    assert db_url.conninfo is not None
    return PostgresStore(db_url.conninfo, spider)


class SqliteStore:
    """``items`` in a SQLite file, in WAL mode so readers never block the writer."""

    CREATE = """
        CREATE TABLE IF NOT EXISTS items (
            url TEXT PRIMARY KEY,
            spider TEXT NOT NULL,
            data TEXT NOT NULL,
            scraped_at TEXT NOT NULL,
            written_at TEXT NOT NULL
        )
    """
    UPSERT = """
        INSERT INTO items (url, spider, data, scraped_at, written_at) VALUES (?, ?, ?, ?, ?)
        ON CONFLICT (url) DO UPDATE SET
            spider = excluded.spider, data = excluded.data,
            scraped_at = excluded.scraped_at, written_at = excluded.written_at
        WHERE excluded.scraped_at >= items.scraped_at
    """
    # Errors caused by a value in the rows rather than by the database's state.
    REFUSED = (sqlite3.DataError, OverflowError, UnicodeEncodeError)

    def __init__(self, path: Path, spider: str) -> None:
        self.path = path
        self.spider = spider
        self._conn: sqlite3.Connection | None = None
        self._connect()

    def _connect(self) -> sqlite3.Connection:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # isolation_level=None: no implicit transactions; write_batch says BEGIN.
            conn = sqlite3.connect(self.path, timeout=SQLITE_BUSY_TIMEOUT, isolation_level=None)
        except (sqlite3.Error, OSError) as exc:
            raise StoreUnavailable(f"cannot open {self.path}: {one_line(exc)}") from exc
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(self.CREATE)
        except sqlite3.Error as exc:
            conn.close()
            raise StoreUnavailable(f"cannot prepare {self.path}: {one_line(exc)}") from exc
        self._conn = conn
        return conn

    def write_batch(self, rows: Sequence[Row]) -> None:
        conn = self._conn or self._connect()
        written_at = utc_now_iso()
        spider = self.spider
        params = [(row.url, spider, row.data, row.scraped_at, written_at) for row in rows]
        try:
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany(self.UPSERT, params)
            conn.execute("COMMIT")
        except self.REFUSED as exc:
            self._rollback()
            raise RowsRefused(one_line(exc)) from exc
        except sqlite3.Error as exc:
            self.close()
            raise StoreUnavailable(one_line(exc)) from exc

    def _rollback(self) -> None:
        if self._conn is not None and self._conn.in_transaction:
            try:
                self._conn.execute("ROLLBACK")
            except sqlite3.Error:
                self.close()

    def close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except sqlite3.Error:
                pass
            self._conn = None


class PostgresStore:
    """``items`` in PostgreSQL: COPY a batch into a temporary table, then one upsert.

    COPY streams the rows in one message and the ``INSERT ... SELECT ... ON
    CONFLICT`` applies them in one statement: about three times the rows per
    second of an array-parameter upsert on the test machine. The temporary
    table lives as long as the connection, so a transaction-pooling
    PgBouncer in front would need session pooling.
    """

    CREATE = """
        CREATE TABLE IF NOT EXISTS items (
            url TEXT PRIMARY KEY,
            spider TEXT NOT NULL,
            data TEXT NOT NULL,
            scraped_at TIMESTAMPTZ NOT NULL,
            written_at TIMESTAMPTZ NOT NULL DEFAULT now()
        )
    """
    CREATE_BATCH = """
        CREATE TEMPORARY TABLE IF NOT EXISTS items_batch (
            url TEXT, data TEXT, scraped_at TIMESTAMPTZ
        ) ON COMMIT DELETE ROWS
    """
    COPY = "COPY items_batch (url, data, scraped_at) FROM STDIN"
    UPSERT = """
        INSERT INTO items (url, spider, data, scraped_at, written_at)
        SELECT url, %s, data, scraped_at, now() FROM items_batch
        ON CONFLICT (url) DO UPDATE SET
            spider = excluded.spider, data = excluded.data,
            scraped_at = excluded.scraped_at, written_at = excluded.written_at
        WHERE excluded.scraped_at >= items.scraped_at
    """
    # Errors caused by a value in the rows (bad text, an index entry too large).
    REFUSED = (psycopg.DataError, psycopg.errors.ProgramLimitExceeded, UnicodeEncodeError)

    def __init__(self, conninfo: str, spider: str) -> None:
        params = psycopg.conninfo.conninfo_to_dict(conninfo)
        for key, value in PG_CONNECT_DEFAULTS.items():
            params.setdefault(key, value)
        self.conninfo = psycopg.conninfo.make_conninfo(**params)  # type: ignore[arg-type]
        self.spider = spider
        self._conn: psycopg.Connection | None = None
        self._connect()

    def _connect(self) -> psycopg.Connection:
        try:
            conn = psycopg.connect(self.conninfo, autocommit=True)
        except psycopg.Error as exc:
            raise StoreUnavailable(one_line(exc)) from exc
        try:
            # Only create when missing: CREATE ... IF NOT EXISTS still needs the
            # CREATE privilege, which a writer of an existing table may lack.
            if conn.execute("SELECT to_regclass('items')").fetchone() == (None,):
                conn.execute(self.CREATE)
            conn.execute(self.CREATE_BATCH)
        except psycopg.Error as exc:
            conn.close()
            raise StoreUnavailable(f"cannot prepare table items: {one_line(exc)}") from exc
        self._conn = conn
        return conn

    def write_batch(self, rows: Sequence[Row]) -> None:
        conn = self._conn if self._conn is not None and not self._conn.closed else self._connect()
        try:
            with conn.transaction():
                cursor = conn.cursor()
                with cursor.copy(self.COPY) as copy:
                    for row in rows:
                        copy.write_row((row.url, row.data, row.scraped_at))
                cursor.execute(self.UPSERT, (self.spider,), prepare=True)
        except self.REFUSED as exc:
            if conn.broken:
                self.close()
                raise StoreUnavailable(one_line(exc)) from exc
            raise RowsRefused(one_line(exc)) from exc
        except psycopg.Error as exc:
            self.close()
            raise StoreUnavailable(one_line(exc)) from exc

    def close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except psycopg.Error:
                pass
            self._conn = None
