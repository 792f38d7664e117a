"""The two databases the db_writer can fill: SQLite and PostgreSQL.

Items land in ``items``, or in the table ITEM_TABLES names for their type,
each with the same columns::

    spider, item_type, item_key, url (may be null), data, scraped_at, written_at
    PRIMARY KEY (spider, item_type, item_key)

``data`` is the item's JSON: JSONB on PostgreSQL, text on SQLite. A batch
is one upsert per table in one transaction, so a replayed item updates its
row instead of adding one. Newer wins: a row is replaced only by an item
whose ``scraped_at`` is not older (ISO-8601 UTC text in SQLite, in one
format, so text order is time order), so a late replay of an older fetch
changes nothing.

A table of the previous release (``items`` keyed on url alone) is migrated
in place the first time a store opens it, in one transaction, with one log
line: every row becomes ``(spider, 'PageItem', url)``, the identity the
bundled spider's items have now (ITEM_KEYS ``{"PageItem": ["url"]}``).

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
import re
import sqlite3
from collections.abc import Iterable, Sequence
from itertools import groupby
from pathlib import Path
from typing import Protocol

import psycopg
import psycopg.conninfo
import psycopg.errors

from spiders_project.db_writer.db_url import SQLITE, DbUrl
from spiders_project.db_writer.entries import DEFAULT_TABLE, LEGACY_TYPE, Row, utc_now_iso

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


# Table names come from ITEM_TABLES and are written into SQL: plain identifiers only.
TABLE_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
COLUMNS = "spider, item_type, item_key, url, data, scraped_at, written_at"


class StoreUnavailable(Exception):
    """The database cannot take this batch now; the same rows may succeed later."""


class RowsRefused(Exception):
    """The database refused a value in these rows; retrying them cannot succeed."""


class Store(Protocol):
    """What the writer needs from a database."""

    def write_batch(self, rows: Sequence[Row]) -> None:
        """Upsert ``rows`` (distinct identities) in one transaction, or raise and write none."""

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


def by_table(rows: Sequence[Row]) -> Iterable[tuple[str, list[Row]]]:
    """The rows of each table, tables in sorted order (the same lock order for every writer)."""
    for table, group in groupby(sorted(rows, key=lambda row: row.table), key=lambda r: r.table):
        yield table, list(group)


class SqliteStore:
    """Item tables in a SQLite file, in WAL mode so readers never block the writer."""

    CREATE = """
        CREATE TABLE IF NOT EXISTS {table} (
            spider TEXT NOT NULL,
            item_type TEXT NOT NULL,
            item_key TEXT NOT NULL,
            url TEXT,
            data TEXT NOT NULL,
            scraped_at TEXT NOT NULL,
            written_at TEXT NOT NULL,
            PRIMARY KEY (spider, item_type, item_key)
        )
    """
    UPSERT = """
        INSERT INTO {table} (spider, item_type, item_key, url, data, scraped_at, written_at)
        VALUES (?, ?, ?, ?, ?, ?, ?)
        ON CONFLICT (spider, item_type, item_key) DO UPDATE SET
            url = excluded.url, data = excluded.data,
            scraped_at = excluded.scraped_at, written_at = excluded.written_at
        WHERE excluded.scraped_at >= {table}.scraped_at
    """
    # Errors caused by a value in the rows rather than by the database's state.
    REFUSED = (sqlite3.DataError, OverflowError, UnicodeEncodeError)

    def __init__(self, path: Path, spider: str) -> None:
        self.path = path
        self.spider = spider
        self._conn: sqlite3.Connection | None = None
        self._tables: set[str] = set()
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
            self._tables = set()
            self._prepare(conn, DEFAULT_TABLE)
        except sqlite3.Error as exc:
            conn.close()
            raise StoreUnavailable(f"cannot prepare {self.path}: {one_line(exc)}") from exc
        self._conn = conn
        return conn

    def _prepare(self, conn: sqlite3.Connection, table: str) -> None:
        """Create ``table`` if missing; migrate a table of the previous release."""
        if table in self._tables:
            return
        columns = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
        if columns and "item_type" not in columns:
            self._migrate(conn, table)
        conn.execute(self.CREATE.format(table=table))
        self._tables.add(table)

    def _migrate(self, conn: sqlite3.Connection, table: str) -> None:
        """Rebuild a url-keyed table as (spider, item_type, item_key), in one transaction.

        SQLite cannot change a primary key in place: the rows are copied into
        the new table and the old one dropped, all or nothing.
        """
        old = f"{table}_before_item_keys"
        conn.execute("BEGIN IMMEDIATE")
        try:
            columns = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
            if "item_type" in columns:  # another writer migrated it meanwhile
                conn.execute("COMMIT")
                return
            conn.execute(f"ALTER TABLE {table} RENAME TO {old}")
            conn.execute(self.CREATE.format(table=table))
            moved = conn.execute(
                f"INSERT INTO {table} ({COLUMNS})"
                f" SELECT spider, ?, url, url, data, scraped_at, written_at FROM {old}",
                (LEGACY_TYPE,),
            ).rowcount
            conn.execute(f"DROP TABLE {old}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        logger.info(
            "migrated table %s of %s to one row per (spider, item_type, item_key):"
            " %d rows kept, as item_type %r keyed by url",
            table,
            self.path,
            moved,
            LEGACY_TYPE,
        )

    def write_batch(self, rows: Sequence[Row]) -> None:
        conn = self._conn or self._connect()
        written_at = utc_now_iso()
        spider = self.spider
        try:
            for table, _ in by_table(rows):
                self._prepare(conn, table)
            conn.execute("BEGIN IMMEDIATE")
            for table, group in by_table(rows):
                conn.executemany(
                    self.UPSERT.format(table=table),
                    [
                        (spider, r.item_type, r.item_key, r.url, r.data, r.scraped_at, written_at)
                        for r in group
                    ],
                )
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
    """Item tables in PostgreSQL: COPY a batch into a temporary table, then one upsert per table.

    COPY streams the rows in one message and the ``INSERT ... SELECT ... ON
    CONFLICT`` applies them in one statement: about three times the rows per
    second of an array-parameter upsert on the test machine. The temporary
    table lives as long as the connection, so a transaction-pooling
    PgBouncer in front would need session pooling.
    """

    CREATE = """
        CREATE TABLE IF NOT EXISTS {table} (
            spider TEXT NOT NULL,
            item_type TEXT NOT NULL,
            item_key TEXT NOT NULL,
            url TEXT,
            data JSONB NOT NULL,
            scraped_at TIMESTAMPTZ NOT NULL,
            written_at TIMESTAMPTZ NOT NULL DEFAULT now(),
            PRIMARY KEY (spider, item_type, item_key)
        )
    """
    CREATE_BATCH = """
        CREATE TEMPORARY TABLE IF NOT EXISTS item_rows_batch (
            tbl TEXT, item_type TEXT, item_key TEXT, url TEXT, data JSONB, scraped_at TIMESTAMPTZ
        ) ON COMMIT DELETE ROWS
    """
    COPY = "COPY item_rows_batch (tbl, item_type, item_key, url, data, scraped_at) FROM STDIN"
    UPSERT = """
        INSERT INTO {table} ({columns})
        SELECT %s, item_type, item_key, url, data, scraped_at, now()
        FROM item_rows_batch WHERE tbl = %s
        ON CONFLICT (spider, item_type, item_key) DO UPDATE SET
            url = excluded.url, data = excluded.data,
            scraped_at = excluded.scraped_at, written_at = excluded.written_at
        WHERE excluded.scraped_at >= {table}.scraped_at
    """
    # Errors caused by a value in the rows (bad text or JSON, an index entry too large).
    REFUSED = (psycopg.DataError, psycopg.errors.ProgramLimitExceeded, UnicodeEncodeError)

    def __init__(self, conninfo: str, spider: str) -> None:
        params = psycopg.conninfo.conninfo_to_dict(conninfo)
        for key, value in PG_CONNECT_DEFAULTS.items():
            params.setdefault(key, value)
        self.conninfo = psycopg.conninfo.make_conninfo(**params)  # type: ignore[arg-type]
        self.spider = spider
        self._conn: psycopg.Connection | None = None
        self._tables: set[str] = set()
        self._connect()

    def _connect(self) -> psycopg.Connection:
        try:
            conn = psycopg.connect(self.conninfo, autocommit=True)
        except psycopg.Error as exc:
            raise StoreUnavailable(one_line(exc)) from exc
        try:
            self._tables = set()
            self._prepare(conn, DEFAULT_TABLE)
            conn.execute(self.CREATE_BATCH)
        except psycopg.Error as exc:
            conn.close()
            raise StoreUnavailable(f"cannot prepare table items: {one_line(exc)}") from exc
        self._conn = conn
        return conn

    def _prepare(self, conn: psycopg.Connection, table: str) -> None:
        """Create ``table`` if missing; migrate a table of the previous release."""
        if table in self._tables:
            return
        # Only create when missing: CREATE ... IF NOT EXISTS still needs the
        # CREATE privilege, which a writer of an existing table may lack.
        if conn.execute("SELECT to_regclass(%s)", (table,)).fetchone() == (None,):
            conn.execute(self.CREATE.format(table=table))
        elif not self._has_item_type(conn, table):
            self._migrate(conn, table)
        self._tables.add(table)

    @staticmethod
    def _has_item_type(conn: psycopg.Connection, table: str) -> bool:
        found = conn.execute(
            "SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass(%s)"
            " AND attname = 'item_type' AND NOT attisdropped",
            (table,),
        ).fetchone()
        return found is not None

    def _migrate(self, conn: psycopg.Connection, table: str) -> None:
        """Alter a url-keyed table in place: new columns, the new key, ``data`` as JSONB.

        One transaction holding an exclusive lock, so workers of other spiders
        sharing the table wait, and a second db_writer migrating at the same
        time finds the work done. Grants and indexes on the table stay.
        """
        with conn.transaction():
            conn.execute(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")
            if self._has_item_type(conn, table):
                return
            row = conn.execute(
                "SELECT conname FROM pg_constraint WHERE conrelid = to_regclass(%s)"
                " AND contype = 'p'",
                (table,),
            ).fetchone()
            conn.execute(f"ALTER TABLE {table} ADD COLUMN item_type TEXT, ADD COLUMN item_key TEXT")
            moved = conn.execute(
                f"UPDATE {table} SET item_type = %s, item_key = url", (LEGACY_TYPE,)
            ).rowcount
            drop_key = f"DROP CONSTRAINT {row[0]}, " if row else ""
            conn.execute(
                f"ALTER TABLE {table} {drop_key}"
                "ALTER COLUMN item_type SET NOT NULL, ALTER COLUMN item_key SET NOT NULL, "
                "ALTER COLUMN url DROP NOT NULL, "
                "ALTER COLUMN data TYPE JSONB USING data::jsonb, "
                "ADD PRIMARY KEY (spider, item_type, item_key)"
            )
        logger.info(
            "migrated table %s to one row per (spider, item_type, item_key), data as JSONB:"
            " %d rows kept, as item_type %r keyed by url",
            table,
            moved,
            LEGACY_TYPE,
        )

    def write_batch(self, rows: Sequence[Row]) -> None:
        conn = self._conn if self._conn is not None and not self._conn.closed else self._connect()
        try:
            tables = [table for table, _ in by_table(rows)]
            for table in tables:
                self._prepare(conn, table)
            with conn.transaction():
                cursor = conn.cursor()
                with cursor.copy(self.COPY) as copy:
                    for r in rows:
                        copy.write_row(
                            (r.table, r.item_type, r.item_key, r.url, r.data, r.scraped_at)
                        )
                for table in tables:
                    cursor.execute(
                        self.UPSERT.format(table=table, columns=COLUMNS),
                        (self.spider, table),
                        prepare=True,
                    )
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
