"""The ``pages`` table in SQLite or PostgreSQL: one row per (spider, url).

::

    spider, url, job, status, fetched_at, outcome, etag, last_modified, digest,
    changes, failures, revisit_interval (seconds), next_due
    PRIMARY KEY (spider, url); INDEX (spider, next_due)

Times are TIMESTAMPTZ on PostgreSQL and ISO-8601 UTC text on SQLite (one
format, so text order is time order), as the item tables keep them.

A batch of page entries is one transaction: read the rows of its URLs (``FOR
UPDATE`` on PostgreSQL), advance each with its entries in time order
(``recrawl.revisit_rules.advance``), upsert the rows that moved, newer wins
in SQL too.
:meth:`PageTable.take_due` is the revisit scheduler's read: due rows, oldest
due first (``FOR UPDATE SKIP LOCKED`` on PostgreSQL, so two schedulers never
take the same row; SQLite's write transaction is the whole file's), handed to
a callback that pushes them to Redis, and their due time moved by their
interval in the same transaction (``revisit_rules.due_after_push``),
committed only once the push succeeded. What a row holds and when it is due
are ``recrawl``'s (``pages_row``, ``revisit_rules``); this module is how
they are stored.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import orjson

from spiders_project.db_writer.sql_store import SqlStore
from spiders_project.recrawl.config import RecrawlConfig
from spiders_project.recrawl.pages_row import PageEntry, PageRow
from spiders_project.recrawl.revisit_rules import advance, due_after_push

# The table's name: ITEM_TABLES may not give it to an item type.
PAGES_TABLE = "pages"

# Columns after (spider, url), in the order PageRow holds them.
_COLUMNS = (
    "url, job, status, fetched_at, outcome, etag, last_modified, digest,"
    " changes, failures, revisit_interval, next_due"
)
CREATE = """
    CREATE TABLE IF NOT EXISTS pages (
        spider TEXT NOT NULL,
        url TEXT NOT NULL,
        job TEXT NOT NULL,
        status INTEGER,
        fetched_at {time} NOT NULL,
        outcome TEXT NOT NULL,
        etag TEXT,
        last_modified TEXT,
        digest TEXT,
        changes INTEGER NOT NULL,
        failures INTEGER NOT NULL,
        revisit_interval {float} NOT NULL,
        next_due {time},
        PRIMARY KEY (spider, url)
    )
"""
INDEX = "CREATE INDEX IF NOT EXISTS pages_next_due ON pages (spider, next_due)"
UPSERT = f"""
    INSERT INTO pages (spider, {_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
    ON CONFLICT (spider, url) DO UPDATE SET
        job = excluded.job, status = excluded.status, fetched_at = excluded.fetched_at,
        outcome = excluded.outcome, etag = excluded.etag,
        last_modified = excluded.last_modified, digest = excluded.digest,
        changes = excluded.changes, failures = excluded.failures,
        revisit_interval = excluded.revisit_interval, next_due = excluded.next_due
    WHERE excluded.fetched_at > pages.fetched_at
"""
# PostgreSQL: the rows that moved are COPYed into a temporary table of the
# connection and upserted from it in one statement, as the item tables load.
# An executemany sends one INSERT a row, which would be most of a batch's
# time (docs/BENCHMARKS.md, "Cost of the WARC archive and the pages table").
# The COPY is binary (cheaper than text: times, integers and the interval go
# as numbers, not text to parse; docs/BENCHMARKS.md, "db_writer throughput"),
# into columns of the types it sends, not ``LIKE pages``: a column an
# operator altered (status as smallint, say) is then a cast in the upsert,
# not binary data of the wrong width, which would refuse every row.
_PG_TYPES = (
    ("spider", "text"),
    ("url", "text"),
    ("job", "text"),
    ("status", "int4"),
    ("fetched_at", "timestamptz"),
    ("outcome", "text"),
    ("etag", "text"),
    ("last_modified", "text"),
    ("digest", "text"),
    ("changes", "int4"),
    ("failures", "int4"),
    ("revisit_interval", "float8"),
    ("next_due", "timestamptz"),
)
PG_STAGING = (
    "CREATE TEMP TABLE IF NOT EXISTS pages_staging ("
    + ", ".join(f"{name} {kind}" for name, kind in _PG_TYPES)
    + ") ON COMMIT DELETE ROWS"
)
PG_COPY = f"COPY pages_staging (spider, {_COLUMNS}) FROM STDIN (FORMAT BINARY)"
PG_UPSERT = UPSERT.replace(
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    f"SELECT spider, {_COLUMNS} FROM pages_staging",
)
# PostgreSQL: the rows of a batch's URLs, one primary-key probe per URL. With
# ``url = ANY(%s)`` the planner may scan every row of the spider (through
# pages_next_due, or the whole table once analyzed), so a batch's cost would
# grow with the table. The LATERAL subquery with FOR UPDATE is never
# flattened, so each URL is an index lookup whatever the statistics say. The
# URLs go as one JSON array: psycopg dumps a list parameter in Python, many
# times slower than orjson (docs/BENCHMARKS.md, "db_writer throughput", and
# "Figures moved out of code comments").
PG_EXISTING = f"""
    SELECT p.* FROM json_array_elements_text(%s::json) AS u(url), LATERAL (
        SELECT {_COLUMNS} FROM pages WHERE spider = %s AND url = u.url FOR UPDATE
    ) AS p
"""
# SQLite's default limit of bound parameters is 32766; a read of one batch's
# URLs stays far below it.
_CHUNK = 500


class PageTable:
    """The ``pages`` rows of one spider, in the store's database."""

    def __init__(self, store: SqlStore[Any], config: RecrawlConfig) -> None:
        self.store = store
        self.config = config
        self.spider = store.spider
        self.postgres = store.TYPES["time"] == "TIMESTAMPTZ"
        self._prepared: object | None = None

    # --- SQL of either database -----------------------------------------------------

    def _sql(self, text: str) -> str:
        return text.replace("?", "%s") if self.postgres else text

    def _time(self, moment: datetime | None) -> Any:
        if moment is None or self.postgres:
            return moment
        if moment.tzinfo is not UTC:  # entries' times are UTC already: no conversion
            moment = moment.astimezone(UTC)
        return moment.isoformat(timespec="microseconds")

    @staticmethod
    def _read_time(value: Any) -> datetime | None:
        if value is None:
            return None
        moment = value if isinstance(value, datetime) else datetime.fromisoformat(value)
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return moment.astimezone(UTC)

    def _row(self, found: Sequence[Any]) -> PageRow:
        fetched_at = self._read_time(found[3])
        assert fetched_at is not None
        return PageRow(
            found[0],
            found[1],
            found[2],
            fetched_at,
            found[4],
            found[5],
            found[6],
            found[7],
            int(found[8]),
            int(found[9]),
            float(found[10]),
            self._read_time(found[11]),
        )

    def _values(self, row: PageRow, fetched_text: str = "") -> tuple[Any, ...]:
        """The row's columns; ``fetched_text``: ``fetched_at`` as canonical text, if known."""
        return (
            self.spider,
            row.url,
            row.job,
            row.status,
            fetched_text if fetched_text and not self.postgres else self._time(row.fetched_at),
            row.outcome,
            row.etag,
            row.last_modified,
            row.digest,
            row.changes,
            row.failures,
            row.interval,
            self._time(row.next_due),
        )

    def _prepare(self, conn: Any) -> None:
        """Create the table and its index once per connection, if missing."""
        if self._prepared is conn:
            return
        kinds = {"time": self.store.TYPES["time"]}
        kinds["float"] = "DOUBLE PRECISION" if self.postgres else "REAL"
        if self.postgres:
            missing = conn.execute("SELECT to_regclass(%s)", (PAGES_TABLE,)).fetchone() == (None,)
        else:
            missing = not conn.execute(f"PRAGMA table_info({PAGES_TABLE})").fetchall()
        if missing:
            with self.store.creating(conn):  # IF NOT EXISTS: another writer's may be first
                conn.execute(CREATE.format(**kinds))
                conn.execute(INDEX)
        if self.postgres:
            conn.execute(PG_STAGING)
        self._prepared = conn

    def _existing(self, conn: Any, urls: list[str]) -> dict[str, PageRow]:
        found: dict[str, PageRow] = {}
        select = f"SELECT {_COLUMNS} FROM pages WHERE spider = ? AND "
        if self.postgres:
            cursor = conn.execute(
                PG_EXISTING, (orjson.dumps(urls).decode(), self.spider), prepare=True
            )
            found.update((row[0], self._row(row)) for row in cursor)
            return found
        for start in range(0, len(urls), _CHUNK):
            chunk = urls[start : start + _CHUNK]
            marks = ", ".join("?" * len(chunk))
            cursor = conn.execute(select + f"url IN ({marks})", (self.spider, *chunk))
            found.update((row[0], self._row(row)) for row in cursor)
        return found

    # --- writes ---------------------------------------------------------------------

    def write(self, entries: Sequence[PageEntry]) -> int:
        """Apply ``entries`` in one transaction; the number of rows that moved.

        Raises StoreUnavailable or RowsRefused as ``Store.write_batch`` does.
        """
        ordered = sorted(entries, key=lambda entry: entry.at)

        def work(conn: Any) -> int:
            self._prepare(conn)
            with self.store.transaction(conn):
                rows = self._existing(conn, list(dict.fromkeys(e.url for e in ordered)))
                # url -> its row after the batch, and the entry that made it (whose
                # at is the row's fetched_at).
                moved: dict[str, tuple[PageRow, PageEntry]] = {}
                for entry in ordered:
                    row = advance(rows.get(entry.url), entry, self.config)
                    if row is not None:
                        rows[entry.url] = row
                        moved[entry.url] = (row, entry)
                values = [self._values(row, entry.at_text) for row, entry in moved.values()]
                if values and self.postgres:
                    cursor = conn.cursor()
                    with cursor.copy(PG_COPY) as copy:
                        copy.set_types([kind for _, kind in _PG_TYPES])
                        for value in values:
                            copy.write_row(value)
                    cursor.execute(PG_UPSERT)
                elif values:
                    conn.cursor().executemany(UPSERT, values)
            return len(moved)

        return self.store.run(work)

    def take_due(
        self, now: datetime, limit: int, push: Callable[[list[PageRow]], None]
    ) -> list[PageRow]:
        """Up to ``limit`` rows due at ``now``: ``push`` them, then move each one's
        due time to ``now`` + its interval, in one transaction. A push that
        raises rolls the move back: the rows stay due."""
        select = (
            f"SELECT {_COLUMNS} FROM pages WHERE spider = ? AND next_due <= ?"
            " ORDER BY next_due LIMIT ?"
        )
        if self.postgres:
            select += " FOR UPDATE SKIP LOCKED"
        move = "UPDATE pages SET next_due = ? WHERE spider = ? AND url = ?"

        def work(conn: Any) -> list[PageRow]:
            self._prepare(conn)
            with self.store.transaction(conn):
                cursor = conn.execute(self._sql(select), (self.spider, self._time(now), limit))
                due = [self._row(found) for found in cursor.fetchall()]
                if not due:
                    return []
                push(due)
                conn.cursor().executemany(
                    self._sql(move),
                    [(self._time(due_after_push(row, now)), self.spider, row.url) for row in due],
                )
            return due

        return self.store.run(work)

    def rows(self) -> list[PageRow]:
        """Every row of the spider (tests, small tables)."""

        def work(conn: Any) -> list[PageRow]:
            self._prepare(conn)
            cursor = conn.execute(
                self._sql(f"SELECT {_COLUMNS} FROM pages WHERE spider = ? ORDER BY url"),
                (self.spider,),
            )
            return [self._row(found) for found in cursor.fetchall()]

        return self.store.run(work)
