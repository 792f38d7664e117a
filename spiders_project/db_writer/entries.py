"""Turning raw entries of ``<spider>:items`` into rows, or into reasons to reject them.

An entry is accepted when it is UTF-8 JSON text of an object with a non-empty
string ``url``. The row keeps the entry's own text as ``data``: the item is
parsed once to be checked and never re-encoded.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import cast

# How much of a rejected entry a log line shows.
PREVIEW_CHARS = 120


@dataclass(frozen=True, slots=True)
class Row:
    """One item as the ``items`` table stores it.

    ``scraped_at`` is ISO-8601 in UTC: the item's ``fetched_at`` when it has a
    usable one, else the time the entry was read.
    """

    url: str
    data: str
    scraped_at: str

    @property
    def raw(self) -> bytes:
        """The entry exactly as it was in Redis (``data`` is its strict UTF-8 decoding)."""
        return self.data.encode("utf-8")


@dataclass(frozen=True, slots=True)
class Rejected:
    """An entry that is not an item, kept byte for byte for ``items:rejected``."""

    raw: bytes
    reason: str

    def preview(self) -> str:
        """The start of the entry, printable on one log line."""
        text = repr(self.raw[:PREVIEW_CHARS])
        return text + ("..." if len(self.raw) > PREVIEW_CHARS else "")


def utc_now_iso() -> str:
    """Now, in the same ISO-8601 UTC form as ``Row.scraped_at``."""
    return datetime.now(UTC).isoformat(timespec="microseconds")


def parse_entries(entries: list[bytes]) -> tuple[list[Row], list[Rejected]]:
    """Split a batch into rows to write and entries to reject, keeping order."""
    rows: list[Row] = []
    rejected: list[Rejected] = []
    now = utc_now_iso()
    loads = json.loads
    for raw in entries:
        try:
            text = raw.decode("utf-8")
            item = loads(text)
        except UnicodeDecodeError as exc:
            rejected.append(Rejected(raw, f"not UTF-8 ({exc.reason} at byte {exc.start})"))
            continue
        except ValueError as exc:
            rejected.append(Rejected(raw, f"not valid JSON ({exc})"))
            continue
        except RecursionError:
            rejected.append(Rejected(raw, "not valid JSON (nested too deeply)"))
            continue
        if type(item) is not dict:
            rejected.append(Rejected(raw, f"not a JSON object (a {type(item).__name__})"))
            continue
        url = item.get("url")
        problem = _url_problem(url)
        if problem:
            rejected.append(Rejected(raw, problem))
            continue
        # _url_problem answers None only for a string.
        rows.append(Row(cast(str, url), text, _scraped_at(item.get("fetched_at"), now)))
    return rows, rejected


def dedupe(rows: list[Row]) -> list[Row]:
    """One row per url: the newest ``scraped_at`` wins, the later entry on a tie.

    An upsert statement may not touch the same row twice. As in the stores'
    upserts, an older fetch replayed late never replaces a newer one.
    """
    by_url: dict[str, Row] = {}
    for row in rows:
        kept = by_url.get(row.url)
        if kept is None or row.scraped_at >= kept.scraped_at:
            by_url[row.url] = row
    if len(by_url) == len(rows):
        return rows
    return list(by_url.values())


def _url_problem(url: object) -> str | None:
    if type(url) is not str:
        return "no string 'url' field" if url is None else f"'url' is a {type(url).__name__}"
    if not url:
        return "'url' is empty"
    if not url.isascii():
        # A lone surrogate (from a "\ud800" escape) cannot be stored as text.
        try:
            url.encode("utf-8")
        except UnicodeEncodeError:
            return "'url' is not valid Unicode"
    if "\x00" in url:
        return "'url' contains a NUL character"
    return None


def _scraped_at(value: object, now: str) -> str:
    """``fetched_at`` (ISO-8601 text or Unix seconds) as ISO-8601 UTC, else ``now``.

    A naive timestamp is taken as UTC. An unusable value does not reject the
    item: the time it was read is the next best answer.
    """
    if value is None:
        return now
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
