"""The one rule for "unchanged since the last fetch", shared by the recrawl and the archive.

An answer is *unchanged* when it is a 304, or a 2xx whose content digest
(``crawl.digests.content_digest``) equals the digest the URL's last fetch
left in its page state (``meta.PAGE_STATE``). Two parts act on it and must
never disagree, or the ``pages`` table would call a page unchanged that the
WARC files hold in full, or the other way round:

- ``recrawl.middleware.PageStateMiddleware`` ends an unchanged answer before
  the spider (no callback, no item rewritten);
- ``archive.revisits`` writes a ``revisit`` record instead of a full
  ``response`` one.

Each decides *when* to ask (the middleware only for a revisit's own URL and
an answer that is not a block; the archive for every fetch) and brings its
own digest: the middleware's is of the body the spider sees, the archive's
of the body it received, with the Content-Encoding undone by itself. The
digest comes as a callable so that a fetch with nothing to compare it with
(no state digest, not a 2xx) is never hashed or inflated for it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from enum import StrEnum
from typing import Any


class Unchanged(StrEnum):
    """Why an answer is unchanged; each caller names it its own way (a stat,
    a WARC revisit profile)."""

    NOT_MODIFIED = "not_modified"  # a 304: the server says so
    SAME_DIGEST = "same_digest"  # a 2xx with the last fetch's content digest


def unchanged(status: int, state: Any, body_digest: Callable[[], str | None]) -> Unchanged | None:
    """Why the answer with ``status`` is unchanged against ``state``, or None.

    ``state`` is a page state (``meta.PAGE_STATE``; None or anything not a
    mapping on a first fetch). ``body_digest`` gives the answer's content
    digest, None when it cannot be known (a body that does not decode); it is
    called only when there is a digest to compare it with.
    """
    if status == 304:
        return Unchanged.NOT_MODIFIED
    if not 200 <= status < 300 or not isinstance(state, Mapping):
        return None
    last = state.get("digest")
    if not isinstance(last, str) or not last:
        return None
    return Unchanged.SAME_DIGEST if body_digest() == last else None
