"""Whether a fetch is a revisit: the rule shared with the ``pages`` table (issue 28).

A fetch is a revisit when its status is 304, or when the body the spider
sees (Content-Encoding undone) has the content digest the URL's last fetch
left in ``meta.PAGE_STATE``. The archive decides this itself, from the body
as received, so it depends on no other middleware's order.
"""

from __future__ import annotations

import datetime
import zlib
from collections.abc import Mapping
from typing import Any

# Scrapy's own requirements, as it advertises br and zstd in Accept-Encoding.
import brotli
from backports import zstd

from spiders_project.archive.records import IDENTICAL, NOT_MODIFIED, Revisit, warc_date
from spiders_project.crawl.digests import content_digest

# A body that inflates past this is not compared (a decompression bomb), as
# Scrapy's own DOWNLOAD_MAXSIZE default: 1 GiB.
MAX_DECODED = 1024 * 1024 * 1024


def decoded(body: bytes, content_encoding: str) -> bytes | None:
    """``body`` with its Content-Encoding undone (gzip, deflate, br, zstd, identity,
    several in a row), or None for an encoding this cannot undo or a broken body."""
    data = body
    for coding in reversed([c.strip().lower() for c in content_encoding.split(",") if c.strip()]):
        try:
            if coding in ("gzip", "x-gzip"):
                inflater = zlib.decompressobj(zlib.MAX_WBITS + 32)  # gzip or zlib header
                data = inflater.decompress(data, MAX_DECODED)
            elif coding == "deflate":
                try:
                    data = zlib.decompressobj().decompress(data, MAX_DECODED)
                except zlib.error:  # raw deflate, as some servers send it
                    data = zlib.decompressobj(-zlib.MAX_WBITS).decompress(data, MAX_DECODED)
            elif coding == "br":
                data = brotli.Decompressor().process(data, output_buffer_limit=MAX_DECODED)
            elif coding == "zstd":
                data = zstd.ZstdDecompressor().decompress(data, max_length=MAX_DECODED)
            elif coding != "identity":
                return None
        except (zlib.error, brotli.error, zstd.ZstdError):
            return None
    return data


def refers_to_date(state: Mapping[str, Any]) -> str | None:
    """The last fetch's time (``fetched_at``, ISO 8601) as a WARC date, if it reads."""
    fetched_at = state.get("fetched_at")
    if not isinstance(fetched_at, str):
        return None
    try:
        when = datetime.datetime.fromisoformat(fetched_at.replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.UTC)
    return warc_date(when)


def revisit_of(
    url: str, status: int, content_encoding: str, body: bytes, state: Any
) -> Revisit | None:
    """The revisit this fetch is, or None when it gives a full response record.

    ``state`` is the request's ``meta.PAGE_STATE`` (None on a first fetch).
    """
    known = state if isinstance(state, Mapping) else {}
    if status == 304:
        return Revisit(NOT_MODIFIED, url, refers_to_date(known))
    digest = known.get("digest")
    if not isinstance(digest, str) or not digest or not 200 <= status < 300:
        return None
    plain = decoded(body, content_encoding)
    if plain is None or content_digest(plain) != digest:
        return None
    return Revisit(IDENTICAL, url, refers_to_date(known))
