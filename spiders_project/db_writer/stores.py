"""The two databases the db_writer can fill: SQLite and PostgreSQL.

Items land in ``items``, or in the table ITEM_TABLES names for their type,
each with the same columns::

    spider, item_type, item_key, url (may be null), data, scraped_at, written_at
    PRIMARY KEY (spider, item_type, item_key)

``data`` is the item's JSON: JSONB on PostgreSQL, text on SQLite. A batch
is one upsert per table in one transaction, so a replayed item updates its
row instead of adding one (on PostgreSQL a batch of new items only is
COPYed into its tables: the same rows, without the upsert's work;
docs/BENCHMARKS.md, "db_writer throughput").
Newer wins: a row is replaced only by an item whose ``scraped_at`` is not
older (ISO-8601 UTC text in SQLite, in one format, so text order is time
order), so a late replay of an older fetch changes nothing.

A table of the previous release (``items`` keyed on url alone) is migrated
in place the first time a store opens it, in one transaction, with one log
line: every row becomes ``(spider, 'PageItem', url)``, the identity the
bundled spider's items have (ITEM_KEYS ``{"PageItem": ["url"]}``).

Both are :class:`~spiders_project.db_writer.sql_store.SqlStore`, which holds
their shared shape and the two exceptions a write ends in; each class here
supplies only what its database does differently.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime
from pathlib import Path

import psycopg
import psycopg.conninfo
import psycopg.errors
from psycopg import postgres
from psycopg.adapt import Dumper
from psycopg.pq import Format

from spiders_project.db_writer.db_url import SQLITE, DbUrl
from spiders_project.db_writer.entries import LEGACY_TYPE, Row, utc_now_iso
from spiders_project.db_writer.optimism import Optimism
from spiders_project.db_writer.sql_store import (
    COLUMNS,
    NEWER_WINS,
    SqlStore,
    Store,
    StoreUnavailable,
    by_table,
    one_line,
)

# Seconds SQLite waits for the write lock held by another connection (in WAL
# mode only another writer, such as an operator's shell, holds it) before the
# write counts as failed and is retried with backoff. Short, because signals
# are only handled between database calls.
SQLITE_BUSY_TIMEOUT = 2.0
# WAL bytes after which a commit copies the WAL back into the database file
# (SQLite's default is 1000 pages, about 4 MB). A checkpoint rewrites every page
# the WAL holds, and the db_writer's batches touch the same index pages again
# and again, so checkpointing ten times less often copies most of them once,
# and a batch's COMMIT costs less (docs/BENCHMARKS.md, "db_writer throughput").
# The WAL grows to about 40 MB between checkpoints (10,000 pages of 4 KB, or
# 2,500 of 16 KB: wal_autocheckpoint counts pages of the file's size).
# Durability is the same: each commit is fsynced in the WAL.
SQLITE_WAL_CHECKPOINT_BYTES = 40_960_000
# Bytes per page of a database file the db_writer creates (SQLite's default is
# 4096; a file made before keeps its own, as does one in WAL mode already).
# A batch's rows land in the table's last pages and all over the key's index;
# with pages four times larger it splits and logs a quarter as many pages:
# SQLite's CPU per new item went from 4.9-5.9 to 3.6-4.7 µs, the WAL checkpointed
# at the same size (32 KB: 3.5-4.4; docs/BENCHMARKS.md, "The db_writer's cost
# per item"). Durability is the same.
SQLITE_PAGE_SIZE = 16_384
# The advisory lock db_writers take to create missing tables one at a time
# (PostgresStore.creating): any bigint other applications of the database
# are unlikely to pick; these are the bytes of "db_write".
SCHEMA_LOCK = int.from_bytes(b"db_write", "big")
# libpq options used unless DB_URL sets them: fail a connect in 10 s, notice
# a vanished server within about a minute, and give up on a write blocked for
# a minute (by another session's row locks, say) so it is logged and retried.
# tcp_user_timeout: a write whose packets vanish (a partition: no reset comes)
# fails after 20 s unacknowledged, so the db_writer says the database is away
# and reconnects; keepalives cover only an idle connection, and without it the
# kernel retransmits for about 15 minutes, the db_writer silent all along.
PG_CONNECT_DEFAULTS = {
    "connect_timeout": "10",
    "options": "-c statement_timeout=60000",
    "keepalives": "1",
    "keepalives_idle": "30",
    "keepalives_interval": "10",
    "keepalives_count": "3",
    "tcp_user_timeout": "20000",
    "application_name": "db_writer",
}


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


class SqliteStore(SqlStore[sqlite3.Connection]):
    """Item tables in a SQLite file, in WAL mode so readers never block the writer."""

    TYPES = {"json": "TEXT", "time": "TEXT", "now": ""}
    UPSERT = (
        """
        INSERT INTO {table} (spider, item_type, item_key, url, data, scraped_at, written_at)
        VALUES (?, ?, ?, ?, ?, ?, ?)"""
        + NEWER_WINS
    )
    ERROR = sqlite3.Error
    REFUSED = (sqlite3.DataError, OverflowError, UnicodeEncodeError)

    def __init__(self, path: Path, spider: str) -> None:
        self.path = path
        super().__init__(spider)

    def _open(self) -> sqlite3.Connection:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # isolation_level=None: no implicit transactions; write_batch says BEGIN.
            return sqlite3.connect(self.path, timeout=SQLITE_BUSY_TIMEOUT, isolation_level=None)
        except (sqlite3.Error, OSError) as exc:
            raise StoreUnavailable(f"cannot open {self.path}: {one_line(exc)}") from exc

    def _start_session(self, conn: sqlite3.Connection) -> None:
        # Turning a new file to WAL takes a lock SQLite does not wait for (its
        # busy handler is not called): another writer turning it at the same
        # moment fails this one at once. Tried again for the busy timeout.
        conn.execute(f"PRAGMA page_size={SQLITE_PAGE_SIZE}")  # a new file's only
        deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT
        while True:
            try:
                conn.execute("PRAGMA journal_mode=WAL")
                break
            except sqlite3.OperationalError as exc:
                if exc.sqlite_errorcode != sqlite3.SQLITE_BUSY or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        conn.execute(f"PRAGMA wal_autocheckpoint={SQLITE_WAL_CHECKPOINT_BYTES // page_size}")

    def _where(self, table: str) -> str:
        return f"table {table} of {self.path}"

    def _unprepared(self) -> str:
        return str(self.path)

    def _has_item_type(self, conn: sqlite3.Connection, table: str) -> bool | None:
        columns = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
        return "item_type" in columns if columns else None

    @contextmanager
    def _locked(self, conn: sqlite3.Connection, table: str) -> Iterator[None]:
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def transaction(self, conn: sqlite3.Connection) -> AbstractContextManager[None]:
        return self._locked(conn, "")

    def _rekey(self, conn: sqlite3.Connection, table: str) -> int:
        """SQLite cannot change a primary key in place: copy the rows, drop the old table."""
        old = f"{table}_before_item_keys"
        conn.execute(f"ALTER TABLE {table} RENAME TO {old}")
        conn.execute(self.CREATE.format(table=table, **self.TYPES))
        moved = conn.execute(
            f"INSERT INTO {table} ({COLUMNS})"
            f" SELECT spider, ?, url, url, data, scraped_at, written_at FROM {old}",
            (LEGACY_TYPE,),
        ).rowcount
        conn.execute(f"DROP TABLE {old}")
        return moved

    def _upsert(self, conn: sqlite3.Connection, rows: Sequence[Row], tables: list[str]) -> None:
        written_at = utc_now_iso()
        spider = self.spider
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

    def _after_refusal(self, conn: sqlite3.Connection, exc: Exception) -> None:
        if conn.in_transaction:
            try:
                conn.execute("ROLLBACK")
            except sqlite3.Error:
                self.close()


class _JsonbText(Dumper):
    """A row's ``data``, JSON text already (orjson wrote it), in JSONB's binary form:
    a version byte, then the text. psycopg's own ``jsonb`` dumper would encode
    the ``str`` as a JSON string. Registered for no Python class, by its oid
    alone: the binary COPY looks its dumpers up by column type (``set_types``)."""

    format = Format.BINARY
    oid = postgres.types["jsonb"].oid

    def dump(self, obj: str) -> bytes:
        return b"\x01" + obj.encode()


class PostgresStore(SqlStore[psycopg.Connection]):
    """Item tables in PostgreSQL: a batch of new items COPYed into its tables, any
    other batch COPYed into a temporary table, then one upsert per table.

    COPY streams the rows in one message and the ``INSERT ... SELECT ... ON
    CONFLICT`` applies them in one statement, where an array-parameter upsert
    builds and parses its arrays (docs/BENCHMARKS.md, "Figures moved out of
    code comments"). The temporary table lives as long as the connection, so a
    transaction-pooling PgBouncer in front would need session pooling.
    """

    TYPES = {"json": "JSONB", "time": "TIMESTAMPTZ", "now": " DEFAULT now()"}
    CREATE_BATCH = """
        CREATE TEMPORARY TABLE IF NOT EXISTS item_rows_batch (
            tbl TEXT, item_type TEXT, item_key TEXT, url TEXT, data JSONB, scraped_at TIMESTAMPTZ
        ) ON COMMIT DELETE ROWS
    """
    COPY = "COPY item_rows_batch (tbl, item_type, item_key, url, data, scraped_at) FROM STDIN"
    # Binary: the server reads the times as numbers and the text as it is,
    # where the text format has it parse two times and scan every byte for
    # escapes: 1.3 µs less of its CPU per row (docs/BENCHMARKS.md, "The
    # db_writer's cost per item").
    COPY_INTO = "COPY {table} ({columns}) FROM STDIN (FORMAT BINARY)"
    COPY_TYPES = ("text", "text", "text", "text", "jsonb", "timestamptz", "timestamptz")
    UPSERT = (
        """
        INSERT INTO {table} ({columns})
        SELECT %s, item_type, item_key, url, data, scraped_at, now()
        FROM item_rows_batch WHERE tbl = %s"""
        + NEWER_WINS
    )
    ERROR = psycopg.Error
    # Bad text or JSON, an index entry too large.
    REFUSED = (psycopg.DataError, psycopg.errors.ProgramLimitExceeded, UnicodeEncodeError)
    MIGRATED_ALSO = ", data as JSONB"
    CHECKS_JSON = True

    def __init__(self, conninfo: str, spider: str) -> None:
        params = psycopg.conninfo.conninfo_to_dict(conninfo)
        for key, value in PG_CONNECT_DEFAULTS.items():
            params.setdefault(key, value)
        self.conninfo = psycopg.conninfo.make_conninfo(**params)  # type: ignore[arg-type]
        self._optimism = Optimism()
        super().__init__(spider)

    def _open(self) -> psycopg.Connection:
        try:
            return psycopg.connect(self.conninfo, autocommit=True)
        except psycopg.Error as exc:
            raise StoreUnavailable(one_line(exc)) from exc

    def _start_session(self, conn: psycopg.Connection) -> None:
        conn.adapters.register_dumper(None, _JsonbText)
        conn.execute(self.CREATE_BATCH)

    def _is_open(self, conn: psycopg.Connection) -> bool:
        return not conn.closed

    def _has_item_type(self, conn: psycopg.Connection, table: str) -> bool | None:
        if conn.execute("SELECT to_regclass(%s)", (table,)).fetchone() == (None,):
            return None
        found = conn.execute(
            "SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass(%s)"
            " AND attname = 'item_type' AND NOT attisdropped",
            (table,),
        ).fetchone()
        return found is not None

    @contextmanager
    def _locked(self, conn: psycopg.Connection, table: str) -> Iterator[None]:
        """An exclusive lock: workers of other spiders sharing the table wait, and a second
        db_writer migrating at the same time finds the work done."""
        with conn.transaction():
            conn.execute(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")
            yield

    @contextmanager
    def transaction(self, conn: psycopg.Connection) -> Iterator[None]:
        with conn.transaction():
            yield

    @contextmanager
    def creating(self, conn: psycopg.Connection) -> Iterator[None]:
        """A transaction holding the database's schema lock (an advisory lock,
        released at its end): DDL is transactional here, so the next writer's
        CREATE ... IF NOT EXISTS, after the wait, finds the table made."""
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
            yield

    def _rekey(self, conn: psycopg.Connection, table: str) -> int:
        """Alter the table in place: new columns, the new key, ``data`` as JSONB.

        Grants and indexes on the table stay.
        """
        row = conn.execute(
            "SELECT conname FROM pg_constraint WHERE conrelid = to_regclass(%s) AND contype = 'p'",
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
        return moved

    def _upsert(self, conn: psycopg.Connection, rows: Sequence[Row], tables: list[str]) -> None:
        if self._optimism.should_try() and self._insert(conn, rows):
            return
        with conn.transaction():
            cursor = conn.cursor()
            with cursor.copy(self.COPY) as copy:
                for r in rows:
                    copy.write_row(r[:6])  # (table, item_type, item_key, url, data, scraped_at)
            for table in tables:
                cursor.execute(
                    self.UPSERT.format(table=table, columns=COLUMNS),
                    (self.spider, table),
                    prepare=True,
                )

    def _insert(self, conn: psycopg.Connection, rows: Sequence[Row]) -> bool:
        """COPY the rows straight into their tables in one transaction; False, and
        nothing written, if one of them is there already.

        Most batches are new items only, and for them this is the whole write:
        no staging table, no ``INSERT ... SELECT``, no speculative insertion of
        ``ON CONFLICT`` (``tests/bench/store_paths.py`` measures both paths:
        docs/BENCHMARKS.md, "db_writer throughput"). A row whose identity
        exists fails the COPY on the primary key (after a concurrent writer's
        transaction holding it ends); the transaction is rolled back and the
        caller upserts the batch, so newer-wins holds. ``optimism`` decides which
        batches are tried.
        """
        cursor = conn.cursor()
        spider = self.spider
        parse = datetime.fromisoformat
        try:
            with conn.transaction():
                # The upsert's written_at is now() too: the server's clock, the transaction's start.
                written_at = cursor.execute("SELECT now()").fetchone()[0]  # type: ignore[index]
                for table, group in by_table(rows):
                    copy_into = self.COPY_INTO.format(table=table, columns=COLUMNS)
                    with cursor.copy(copy_into) as copy:
                        copy.set_types(self.COPY_TYPES)
                        for r in group:
                            at = parse(r[5])
                            copy.write_row((spider, r[1], r[2], r[3], r[4], at, written_at))
        except psycopg.errors.UniqueViolation:
            self._optimism.missed()
            return False
        except ValueError as exc:
            # A scraped_at of the canonical shape but no real time (a 30 February, non-ASCII
            # digits): a refused value, as PostgreSQL would refuse it as text.
            raise psycopg.DataError(f"scraped_at: {exc}") from exc
        self._optimism.held()
        return True

    def _after_refusal(self, conn: psycopg.Connection, exc: Exception) -> None:
        if conn.broken:
            self.close()
            raise StoreUnavailable(one_line(exc)) from exc
