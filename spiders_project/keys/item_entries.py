"""The item buffer's second entry format: a header the db_writer reads, then the item's JSON.
Stdlib only, beside the key names: the worker, the db_writer and the read model share it.

In the JSON entry (``buffer.encode_entry``) the item sits inside the object, so
the db_writer decodes every field of every item only to encode it again as the
row's ``data``: about half of its parse (docs/BENCHMARKS.md, "The db_writer's
cost per item"). Here the item's JSON follows a header, as orjson wrote it, and
the writer passes those bytes through::

    \\x01 type \\x00 key \\x00 url \\x00 at \\x00 {...the item's JSON...}

The first byte cannot start a JSON text, so one buffer holds both formats and a
reader tells them apart by it. NUL separates the fields: a type, key or url
holding one is refused by both stores anyway (``encode_raw`` returns None and
the worker would write the JSON entry, which the db_writer rejects with the reason),
and orjson escapes it inside the item. ``url`` is empty for none. ``at`` is the
row's ``scraped_at`` already chosen: the item's ``fetched_at`` when it is
in the canonical form, else the time the item left the pipelines.
"""

from __future__ import annotations

RAW_MARK = b"\x01"
SEPARATOR = b"\x00"
_FIELDS = 5


def encode_raw(
    item_type: str, key: str, url: str | None, at: str, item_json: bytes
) -> bytes | None:
    """The entry, or None if a header field holds a NUL or the url is empty (the JSON
    entry carries those, and the db_writer rejects them with the reason)."""
    if url == "":
        return None
    head = (item_type, key, url or "", at)
    if any("\x00" in field for field in head):
        return None
    return RAW_MARK + SEPARATOR.join(field.encode() for field in head) + SEPARATOR + item_json


def split_raw(raw: bytes) -> tuple[str, str, str | None, str, bytes]:
    """``(type, key, url, at, item_json)`` of an entry that starts with RAW_MARK.

    Raises ValueError for a header cut short or not UTF-8; the item's JSON is
    not checked here.
    """
    parts = raw[1:].split(SEPARATOR, _FIELDS - 1)
    if len(parts) != _FIELDS:
        raise ValueError(f"a header of {len(parts) - 1} fields, not {_FIELDS - 1} (cut short?)")
    item_type, key, url, at, item_json = parts
    try:
        return item_type.decode(), key.decode(), url.decode() or None, at.decode(), item_json
    except UnicodeDecodeError as exc:
        raise ValueError(f"a header not UTF-8 ({exc})") from None
