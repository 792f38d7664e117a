"""Whether a fetch is a WARC revisit, by the rule the ``pages`` table uses too.

A fetch is a revisit when its status is 304, or when the body the spider
sees (Content-Encoding undone) has the content digest the URL's last fetch
left in ``meta.PAGE_STATE``. The rule is the recrawl's (``recrawl.unchanged``),
so that a page the ``pages`` table calls unchanged is a revisit record here.
The archive applies it to the body as received, undoing the Content-Encoding
itself (:func:`decoded`), so it depends on no other middleware's order.
"""

from __future__ import annotations

import zlib
from typing import Any

# Scrapy's own requirements, as it advertises br and zstd in Accept-Encoding.
import brotli
from backports import zstd

from spiders_project.archive.records import IDENTICAL, NOT_MODIFIED, Revisit, warc_date
from spiders_project.crawl.digests import content_digest
from spiders_project.recrawl.page_state import last_fetched
from spiders_project.recrawl.unchanged import Unchanged, unchanged

# A body that inflates past this is not compared (a decompression bomb), as
# Scrapy's own DOWNLOAD_MAXSIZE default: 1 GiB.
MAX_DECODED = 1024 * 1024 * 1024
# The WARC 1.1 revisit profile of each reason an answer is unchanged.
PROFILES = {Unchanged.NOT_MODIFIED: NOT_MODIFIED, Unchanged.SAME_DIGEST: IDENTICAL}


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


def refers_to_date(state: Any) -> str | None:
    """The last fetch's time (``fetched_at``, ISO 8601) as a WARC date, if it reads."""
    when = last_fetched(state)
    return warc_date(when) if when is not None else None


def revisit_of(
    url: str, status: int, content_encoding: str, body: bytes, state: Any
) -> Revisit | None:
    """The revisit this fetch is, or None when it gives a full response record.

    ``state`` is the request's ``meta.PAGE_STATE`` (None on a first fetch).
    """

    def digest() -> str | None:
        plain = decoded(body, content_encoding)
        return content_digest(plain) if plain is not None else None

    why = unchanged(status, state, digest)
    if why is None:
        return None
    return Revisit(PROFILES[why], url, refers_to_date(state))
