"""The db_writer's settings, read once into a typed config and checked."""

from __future__ import annotations

from dataclasses import dataclass, field

from scrapy.settings import BaseSettings

from spiders_project.config import SettingsReader
from spiders_project.db_writer.page_store import PAGES_TABLE
from spiders_project.db_writer.sql_store import TABLE_NAME


@dataclass(frozen=True)
class WriterConfig:
    """The db_writer's settings, read once and checked."""

    batch_size: int
    max_wait: float
    idle_wait: float
    retry_backoff: float
    retry_backoff_max: float
    lock_ttl: float
    tables: dict[str, str] = field(default_factory=dict)  # ITEM_TABLES: item type -> table
    spiders_poll: float = 5.0  # --all-spiders looks for new spiders this often (s)

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> WriterConfig:
        read = SettingsReader(settings)
        backoff = read.getfloat("DB_WRITER_RETRY_BACKOFF", above=0)
        return cls(
            batch_size=read.getint("DB_WRITER_BATCH_SIZE", minimum=1),
            max_wait=read.getfloat("DB_WRITER_MAX_WAIT", minimum=0),
            idle_wait=read.getfloat("DB_WRITER_IDLE_WAIT", above=0),
            retry_backoff=backoff,
            retry_backoff_max=read.getfloat("DB_WRITER_RETRY_BACKOFF_MAX", minimum=backoff),
            lock_ttl=read.getfloat("DB_WRITER_LOCK_TTL", above=0),
            tables=_item_tables(read),
            spiders_poll=read.getfloat("DB_WRITER_SPIDERS_POLL", above=0),
        )


def _item_tables(read: SettingsReader) -> dict[str, str]:
    """ITEM_TABLES, checked: each table name is written into SQL."""
    tables = read.getdict("ITEM_TABLES")
    for item_type, table in tables.items():
        if not isinstance(item_type, str) or not isinstance(table, str):
            read.fail("ITEM_TABLES", "must map item type names to table names")
        if table == PAGES_TABLE:
            read.fail("ITEM_TABLES", f"{table!r} is the db_writer's own table of page states")
        if not TABLE_NAME.match(table):
            read.fail(
                "ITEM_TABLES",
                f"table {table!r} must be a lower-case SQL identifier (letters, digits, _)",
            )
    return dict(tables)
