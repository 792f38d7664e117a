"""The db_writer's ``items`` table as the demo reads it: empty at start, checked at the end."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

import psycopg

from spiders_project.db_writer.db_url import SQLITE, DbUrlError, parse_db_url
from spiders_project.demo.output import DemoError
from spiders_project.demo.supervisor import ROOT

DEFAULT_DB_URL = "sqlite:///data/demo-items.db"


class ItemsTable:
    """Reads the db_writer's ``items`` table, SQLite or PostgreSQL, to count and check."""

    def __init__(self, url: str) -> None:
        try:
            self.db = parse_db_url(url)
        except DbUrlError as exc:
            raise DemoError(str(exc), status=2) from exc
        self.path: Path | None = None
        if self.db.backend == SQLITE:
            assert self.db.path is not None
            self.path = self.db.path if self.db.path.is_absolute() else ROOT / self.db.path

    @property
    def location(self) -> str:
        return str(self.path) if self.path is not None else self.db.redacted()

    def remove(self) -> None:
        """Delete the SQLite file and its WAL companions (only for the demo's own file)."""
        assert self.path is not None
        for suffix in ("", "-wal", "-shm"):
            Path(f"{self.path}{suffix}").unlink(missing_ok=True)

    def _query(self, sql: str) -> list[tuple[Any, ...]]:
        """Rows of ``sql``; no rows while the table does not exist yet."""
        if self.path is not None:
            if not self.path.exists():
                return []
            lite = sqlite3.connect(self.path, timeout=10)
            try:
                return lite.execute(sql).fetchall()
            except sqlite3.OperationalError as exc:
                if "no such table" in str(exc):
                    return []
                raise
            finally:
                lite.close()
        assert self.db.conninfo is not None
        with psycopg.connect(self.db.conninfo, autocommit=True, connect_timeout=10) as conn:
            if conn.execute("SELECT to_regclass('items')").fetchone() == (None,):
                return []
            return conn.execute(sql).fetchall()

    def count(self) -> int:
        rows = self._query("SELECT count(*) FROM items")
        return rows[0][0] if rows else 0

    def urls(self) -> list[str]:
        return [row[0] for row in self._query("SELECT url FROM items")]


def prepare_db() -> tuple[str, ItemsTable]:
    """DB_URL for the programs and a reader of its table, empty at start."""
    given = os.environ.get("DB_URL", "")
    table = ItemsTable(given or DEFAULT_DB_URL)
    try:
        if given == "":
            table.remove()
        elif (rows := table.count()) > 0:
            raise DemoError(
                f"DB_URL {table.db.redacted()} already holds {rows} rows in items; the demo "
                "needs an empty table to check its crawl: point DB_URL elsewhere, or unset it "
                f"to use {DEFAULT_DB_URL}",
                status=2,
            )
    except (sqlite3.Error, psycopg.Error, OSError) as exc:
        raise DemoError(f"cannot use the database {table.location}: {exc}") from exc
    return given or DEFAULT_DB_URL, table
