"""Turning raw entries of ``<spider>:items`` into rows, or into reasons to reject them.

A worker writes one JSON object per item (``spiders_project.item_buffer``)::

    {"type": "ProductItem", "key": "sku-1", "url": "https://...", "at": "...",
     "item": {...}}

and the row is ``(item_type, item_key, url, data, scraped_at)`` in the table
ITEM_TABLES names for the type (``items`` by default). An entry of the
previous release (the item object itself, always a PageItem with a ``url``)
is still accepted: its row is ``("PageItem", url)``, as the migration of the
old url-keyed table makes its rows. An entry of the header-and-item format
(``keys/item_entries.py``) becomes a row without its item being re-encoded:
the item's JSON is the row's ``data`` as the worker wrote it. Into PostgreSQL it
is not decoded either: the JSONB column checks it, and a row it refuses is set
aside by the writer's split, as any refused value. SQLite's TEXT column checks
nothing, so for it the item is checked here (``store_checks_json``). An object with
``"kind": "page"`` is a page-state entry for the ``pages`` table
(``recrawl/pages_row.py``), parsed there when the caller asks for them. Anything
else is rejected with a reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, NamedTuple

import orjson

from spiders_project.keys.item_entries import RAW_MARK, split_raw
from spiders_project.recrawl.pages_row import (
    CANONICAL_TIME,
    PAGE_KIND,
    BadPageEntry,
    PageEntry,
    parse_page,
)

# How much of a rejected entry a log line shows.
PREVIEW_CHARS = 120
# The table of every item type ITEM_TABLES does not route elsewhere.
DEFAULT_TABLE = "items"
# The item type of entries written by the previous release, and of the rows
# of its url-keyed table after migration.
LEGACY_TYPE = "PageItem"
_MAX_NAME = 200


class Row(NamedTuple):
    """One item as its table stores it.

    ``scraped_at`` is ISO-8601 in UTC: the item's ``fetched_at`` when it has a
    usable one, else the time it left the worker's pipelines, else the time
    the entry was read. ``raw`` is the entry as it was in Redis. The first
    six fields are, in this order, the columns PostgresStore COPYs.

    A named tuple, not a frozen dataclass: a batch builds one per item, and a
    frozen dataclass' ``__init__`` (one ``object.__setattr__`` per field) is a
    large share of an entry's parse time (docs/BENCHMARKS.md, "Figures moved
    out of code comments").
    """

    table: str
    item_type: str
    item_key: str
    url: str | None
    data: str
    scraped_at: str
    raw: bytes

    @property
    def identity(self) -> tuple[str, str, str]:
        return (self.table, self.item_type, self.item_key)


@dataclass(frozen=True, slots=True)
class Rejected:
    """An entry that is not an item, kept byte for byte for ``items:rejected``."""

    raw: bytes
    reason: str

    def preview(self) -> str:
        """The start of the entry, printable on one log line."""
        text = repr(self.raw[:PREVIEW_CHARS])
        return text + ("..." if len(self.raw) > PREVIEW_CHARS else "")


class _Bad(ValueError):
    """Why an entry is rejected."""


def utc_now_iso() -> str:
    """Now, in the same ISO-8601 UTC form as ``Row.scraped_at``."""
    return datetime.now(UTC).isoformat(timespec="microseconds")


def parse_entries(
    entries: list[bytes],
    tables: Mapping[str, str] | None = None,
    pages: list[PageEntry] | None = None,
    store_checks_json: bool = False,
) -> tuple[list[Row], list[Rejected]]:
    """Split a batch into rows to write and entries to reject, keeping order.

    Page-state entries go to ``pages`` when it is given, else are rejected.
    ``store_checks_json`` leaves the item JSON of header-and-item entries to the
    database (``Store.CHECKS_JSON``).
    """
    rows: list[Row] = []
    rejected: list[Rejected] = []
    now = utc_now_iso()
    tables = tables or {}
    loads = orjson.loads
    for raw in entries:
        if raw[:1] == RAW_MARK:
            try:
                rows.append(_raw_row(raw, tables, now, not store_checks_json))
            except (_Bad, ValueError) as exc:
                rejected.append(Rejected(raw, str(exc)))
            continue
        try:
            obj = loads(raw)
        except orjson.JSONDecodeError as exc:
            rejected.append(Rejected(raw, f"not valid JSON ({exc})"))
            continue
        try:
            if type(obj) is not dict:
                raise _Bad(f"not a JSON object (a {type(obj).__name__})")
            if obj.get("kind") == PAGE_KIND:
                if pages is None:
                    raise _Bad("a page-state entry, and no pages table is written")
                pages.append(parse_page(obj, raw))
            elif type(obj.get("item")) is dict:
                rows.append(_row(obj, raw, tables, now))
            else:
                rows.append(_legacy_row(obj, raw, tables, now))
        except (_Bad, BadPageEntry) as exc:
            rejected.append(Rejected(raw, str(exc)))
    return rows, rejected


def _row(obj: dict[str, Any], raw: bytes, tables: Mapping[str, str], now: str) -> Row:
    item: dict[str, Any] = obj["item"]
    item_type = obj.get("type")
    if type(item_type) is not str or not 0 < len(item_type) <= _MAX_NAME or "\x00" in item_type:
        item_type = _name(item_type, "type")  # raises with the reason
    item_key = obj.get("key")
    if type(item_key) is not str or not item_key or "\x00" in item_key:
        if item_key is None:
            raise _Bad(str(obj.get("why") or "no 'key'"))
        _text(item_key, "key")  # raises with the reason
    url = obj.get("url")
    if url is not None:
        _text(url, "url")
    fetched_at = item.get("fetched_at")
    if fetched_at is None:
        at = _scraped_at(obj.get("at"), now) or now
    else:
        at = _scraped_at(fetched_at, None) or _scraped_at(obj.get("at"), now) or now
    data = orjson.dumps(item).decode()
    return Row(tables.get(item_type, DEFAULT_TABLE), item_type, item_key, url, data, at, raw)


def _raw_row(raw: bytes, tables: Mapping[str, str], now: str, check: bool) -> Row:
    item_type, item_key, url, at, item_json = split_raw(raw)
    if not 0 < len(item_type) <= _MAX_NAME:
        _name(item_type, "type")  # raises with the reason
    if not item_key:
        raise _Bad("'key' is empty")
    if item_json[:1] != b"{" or item_json[-1:] != b"}":
        raise _Bad("the item is not a JSON object (cut short?)")
    if check:
        try:
            orjson.loads(item_json)
        except orjson.JSONDecodeError as exc:
            raise _Bad(f"the item is not valid JSON ({exc})") from None
    if not (len(at) == 32 and CANONICAL_TIME.fullmatch(at)):
        at = _scraped_at(at, now) or now
    data = item_json.decode()
    return Row(tables.get(item_type, DEFAULT_TABLE), item_type, item_key, url, data, at, raw)


def _legacy_row(obj: dict[str, Any], raw: bytes, tables: Mapping[str, str], now: str) -> Row:
    url = obj.get("url")
    if url is None:
        raise _Bad("no string 'url' field")
    _text(url, "url")
    at = _scraped_at(obj.get("fetched_at"), now) or now
    table = tables.get(LEGACY_TYPE, DEFAULT_TABLE)
    return Row(table, LEGACY_TYPE, url, url, raw.decode("utf-8"), at, raw)


def _text(value: Any, what: str) -> str:
    if type(value) is not str:
        raise _Bad(f"'{what}' is a {type(value).__name__}")
    if not value:
        raise _Bad(f"'{what}' is empty")
    if "\x00" in value:
        raise _Bad(f"'{what}' contains a NUL character")
    return value


def _name(value: Any, what: str, limit: int | None = _MAX_NAME) -> str:
    if value is None:
        raise _Bad(f"no '{what}'")
    text = _text(value, what)
    if limit is not None and len(text) > limit:
        raise _Bad(f"'{what}' is longer than {limit} characters")
    return text


def dedupe(rows: list[Row]) -> list[Row]:
    """One row per identity: the newest ``scraped_at`` wins, the later entry on a tie.

    An upsert statement may not touch the same row twice. As in the stores'
    upserts, an older fetch replayed late never replaces a newer one.
    """
    by_identity: dict[tuple[str, str, str], Row] = {}
    for row in rows:
        identity = row.identity
        kept = by_identity.get(identity)
        if kept is None or row.scraped_at >= kept.scraped_at:
            by_identity[identity] = row
    if len(by_identity) == len(rows):
        return rows
    return list(by_identity.values())


def _scraped_at(value: object, now: str | None) -> str | None:
    """``fetched_at`` (ISO-8601 text or Unix seconds) as ISO-8601 UTC, else ``now``.

    A naive timestamp is taken as UTC. An unusable value does not reject the
    item: the time it was read is the next best answer.
    """
    if value is None:
        return now
    if type(value) is str and len(value) == 32 and CANONICAL_TIME.fullmatch(value):
        return value  # already in the one form (what workers write): no need to parse
    try:
        if type(value) is str:
            moment = datetime.fromisoformat(value)
        elif type(value) in (int, float):
            moment = datetime.fromtimestamp(value, UTC)  # type: ignore[arg-type]
        else:
            return now
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return moment.astimezone(UTC).isoformat(timespec="microseconds")
    except (ValueError, OverflowError, OSError):
        return now
