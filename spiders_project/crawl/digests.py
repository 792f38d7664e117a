"""The one content digest of a fetched body, shared by every part that compares bodies.

``sha1:<BASE32>`` is the form WARC uses for ``WARC-Payload-Digest`` (and
Heritrix, StormCrawler and pywb read), so a digest stored in the ``pages``
table, carried in a revisit request's ``meta.PAGE_STATE`` and written in a
WARC record can be compared as plain strings. Stdlib only: every layer may
import it.
"""

from __future__ import annotations

import base64
import hashlib


def content_digest(body: bytes) -> str:
    """``sha1:`` and the base32 SHA-1 of ``body``: the body the spider sees
    (after Content-Encoding is undone), so a server that gzips the same page
    differently each time does not make it look changed."""
    return "sha1:" + base64.b32encode(hashlib.sha1(body).digest()).decode("ascii")
