"""What a store of the db_writer is, and the shape both of its databases share.

Driver errors leave a store as one of two exceptions, because
the writer must treat them differently:

- :class:`StoreUnavailable`: the database cannot take writes now (down,
  locked, disk full, table altered); the same rows are retried later.
- :class:`RowsRefused`: the database refused a value in these rows; the same
  rows would fail forever, so the writer isolates and rejects them.

:class:`SqlStore` is that shape once: connect, prepare each table once per
connection (create it if missing, migrate a url-keyed table of the previous
release under a lock), upsert a batch in one transaction, sort the driver's
errors into those two exceptions, and reconnect on the next write after a
failure. ``stores.py`` fills in what SQLite and PostgreSQL do their own way:
the driver, the column types, the lock, the migration and the upsert.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from itertools import groupby
from typing import ClassVar, Generic, Protocol, TypeVar

from spiders_project.db_writer.entries import DEFAULT_TABLE, LEGACY_TYPE, Row

# The name the stores' log lines have always carried (they came from stores.py).
logger = logging.getLogger("spiders_project.db_writer.stores")

# Table names come from ITEM_TABLES and are written into SQL: plain identifiers only.
TABLE_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
COLUMNS = "spider, item_type, item_key, url, data, scraped_at, written_at"
# The tail of both upserts: newer wins, so a row is replaced only by an item
# whose scraped_at is not older, and a late replay of an older fetch changes nothing.
NEWER_WINS = """
        ON CONFLICT (spider, item_type, item_key) DO UPDATE SET
            url = excluded.url, data = excluded.data,
            scraped_at = excluded.scraped_at, written_at = excluded.written_at
        WHERE excluded.scraped_at >= {table}.scraped_at
    """


class StoreUnavailable(Exception):
    """The database cannot take this batch now; the same rows may succeed later."""


class RowsRefused(Exception):
    """The database refused a value in these rows; retrying them cannot succeed."""


class Store(Protocol):
    """What the writer needs from a database."""

    # Whether the database refuses a row whose data is not valid JSON (as a refused
    # value, set aside by the writer's split), so the parse need not check it.
    CHECKS_JSON: bool

    def write_batch(self, rows: Sequence[Row]) -> None:
        """Upsert ``rows`` (distinct identities) in one transaction, or raise and write none."""

    def close(self) -> None:
        """Release the connection; a later write reconnects."""


def one_line(exc: BaseException) -> str:
    """An exception as ``Type: message`` on a single line (libpq messages span several)."""
    return f"{type(exc).__name__}: {' '.join(str(exc).split())}"


def by_table(rows: Sequence[Row]) -> Iterable[tuple[str, list[Row]]]:
    """The rows of each table, tables in sorted order (the same lock order for every writer).

    A batch of one table (the usual case: ITEM_TABLES unset) is not sorted.
    """
    if rows and all(row.table == rows[0].table for row in rows):
        yield rows[0].table, list(rows)
        return
    for table, group in groupby(sorted(rows, key=lambda row: row.table), key=lambda r: r.table):
        yield table, list(group)


class Connection(Protocol):
    """What the shared shape calls on either driver's connection."""

    def execute(self, sql: str, /) -> object: ...

    def close(self) -> None: ...


Conn = TypeVar("Conn", bound=Connection)
T = TypeVar("T")


class SqlStore(Generic[Conn]):
    """The shape both stores share; a subclass fills in its database's part.

    The connection is opened at construction (a database that cannot be
    reached or prepared is :class:`StoreUnavailable` at once) and again on the
    first write after a failure. Every table is prepared once per connection.
    """

    CHECKS_JSON = False

    # Column types that differ: the item's JSON, the two times, written_at's default.
    CREATE = """
        CREATE TABLE IF NOT EXISTS {table} (
            spider TEXT NOT NULL,
            item_type TEXT NOT NULL,
            item_key TEXT NOT NULL,
            url TEXT,
            data {json} NOT NULL,
            scraped_at {time} NOT NULL,
            written_at {time} NOT NULL{now},
            PRIMARY KEY (spider, item_type, item_key)
        )
    """
    TYPES: ClassVar[dict[str, str]]
    # The driver's errors; those of them caused by a value in the rows rather
    # than by the database's state.
    ERROR: ClassVar[type[Exception]]
    REFUSED: ClassVar[tuple[type[Exception], ...]]
    # What the log line of a migration adds after the new key.
    MIGRATED_ALSO: ClassVar[str] = ""

    def __init__(self, spider: str) -> None:
        self.spider = spider
        self._conn: Conn | None = None
        self._tables: set[str] = set()
        self._connect()

    # --- what each database does its own way ---------------------------------------

    def _open(self) -> Conn:
        """A new connection, or StoreUnavailable."""
        raise NotImplementedError

    def _start_session(self, conn: Conn) -> None:
        """What a new connection sets up before the first table."""

    def _has_item_type(self, conn: Conn, table: str) -> bool | None:
        """Whether ``table`` has the column item_type; None when there is no such table."""
        raise NotImplementedError

    def _locked(self, conn: Conn, table: str) -> AbstractContextManager[None]:
        """One transaction in which ``table`` is the caller's alone."""
        raise NotImplementedError

    def transaction(self, conn: Conn) -> AbstractContextManager[None]:
        """One transaction: committed at the end of the block, rolled back on an error."""
        raise NotImplementedError

    def creating(self, conn: Conn) -> AbstractContextManager[None]:
        """One transaction in which missing tables are created, one writer at a time.

        Two db_writers starting on an empty database create the same tables;
        a second ``CREATE TABLE IF NOT EXISTS`` running beside the first fails
        on PostgreSQL (its catalog's unique index), so that writer would not
        start. SQLite's write transaction is the whole file's already.
        """
        return self.transaction(conn)

    def _rekey(self, conn: Conn, table: str) -> int:
        """Turn a url-keyed ``table`` into the present one; the rows kept."""
        raise NotImplementedError

    def _upsert(self, conn: Conn, rows: Sequence[Row], tables: list[str]) -> None:
        """Upsert ``rows`` into their prepared ``tables`` in one transaction."""
        raise NotImplementedError

    def _is_open(self, conn: Conn) -> bool:
        """Whether ``conn`` can still be used (a driver may close it on its own)."""
        return True

    def _after_refusal(self, conn: Conn, exc: Exception) -> None:
        """End the refused transaction; raise StoreUnavailable if it took the connection."""

    def _where(self, table: str) -> str:
        """``table``, as the migration's log line names it."""
        return f"table {table}"

    def _unprepared(self) -> str:
        """What the error of a connection that could not be prepared names."""
        return self._where(DEFAULT_TABLE)

    # --- the shared shape --------------------------------------------------------

    def _connect(self) -> Conn:
        conn = self._open()
        try:
            self._start_session(conn)
            self._tables = set()
            self._prepare(conn, DEFAULT_TABLE)
        except self.ERROR as exc:
            conn.close()
            raise StoreUnavailable(f"cannot prepare {self._unprepared()}: {one_line(exc)}") from exc
        self._conn = conn
        return conn

    def _prepare(self, conn: Conn, table: str) -> None:
        """Create ``table`` if missing; migrate a table of the previous release."""
        if table in self._tables:
            return
        has_item_type = self._has_item_type(conn, table)
        # Only create when missing: CREATE ... IF NOT EXISTS still needs the
        # CREATE privilege on PostgreSQL, which a writer of an existing table may lack.
        if has_item_type is None:
            with self.creating(conn):  # IF NOT EXISTS: another writer's may be first
                conn.execute(self.CREATE.format(table=table, **self.TYPES))
        elif not has_item_type:
            self._migrate(conn, table)
        self._tables.add(table)

    def _migrate(self, conn: Conn, table: str) -> None:
        """Give a url-keyed table the key (spider, item_type, item_key), all or nothing."""
        with self._locked(conn, table):
            if self._has_item_type(conn, table):  # another writer migrated it meanwhile
                return
            moved = self._rekey(conn, table)
        logger.info(
            "migrated %s to one row per (spider, item_type, item_key)%s:"
            " %d rows kept, as item_type %r keyed by url",
            self._where(table),
            self.MIGRATED_ALSO,
            moved,
            LEGACY_TYPE,
        )

    def write_batch(self, rows: Sequence[Row]) -> None:
        def write(conn: Conn) -> None:
            tables = [table for table, _ in by_table(rows)]
            for table in tables:
                self._prepare(conn, table)
            self._upsert(conn, rows, tables)

        self.run(write)

    def run(self, work: Callable[[Conn], T]) -> T:
        """``work(conn)`` on the store's connection (opened again after a failure),
        its driver errors sorted into RowsRefused and StoreUnavailable."""
        conn = self._conn
        if conn is None or not self._is_open(conn):
            conn = self._connect()
        try:
            return work(conn)
        except self.REFUSED as exc:
            self._after_refusal(conn, exc)
            raise RowsRefused(one_line(exc)) from exc
        except self.ERROR as exc:
            self.close()
            raise StoreUnavailable(one_line(exc)) from exc

    def close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except self.ERROR:
                pass
            self._conn = None
