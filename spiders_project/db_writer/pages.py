"""Page-state entries into rows of the ``pages`` table: one row per (spider, url).

A worker writes one entry per fetch outcome into ``<spider>:items``
(``spiders_project.recrawl.middleware``)::

    {"kind": "page", "url": "https://...", "job": "default", "at": "2026-...+00:00",
     "outcome": "fetched", "status": 200, "etag": "...", "last_modified": "...",
     "digest": "sha1:..."}

The entry says what happened; the row adds what follows from the URL's
history, which only the database holds: whether the content changed since
the last fetch (its digest against the row's), the count of changes, the
streak of failures, the revisit interval (fixed, or adaptive:
``RecrawlConfig.next_interval``) and the next due time. :func:`advance` is
that rule, pure. Newer wins: an entry whose ``at`` is not after the row's
``fetched_at`` changes nothing, so a batch replayed after a lost
acknowledgement counts no change twice.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any, NamedTuple

from spiders_project.keys.jobs import DEFAULT_JOB
from spiders_project.recrawl.config import RecrawlConfig
from spiders_project.recrawl.page_state import (
    ANSWERED,
    FETCHED,
    NOT_MODIFIED,
    OUTCOMES,
)

# The value of "kind" that routes an entry of <spider>:items here.
PAGE_KIND = "page"
PAGES_TABLE = "pages"
_MAX_TEXT = 1024
_MAX_URL = 8192
# ISO-8601 UTC with microseconds: the one form times are stored in as text
# (SQLite), and the form workers write.
CANONICAL_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}\+00:00")


class BadPageEntry(ValueError):
    """Why a page entry is rejected."""


class PageEntry(NamedTuple):
    """One fetch outcome, as a worker reported it; ``raw`` as it was in Redis.

    This and :class:`PageRow` are named tuples, not frozen dataclasses: a
    batch builds one of each per entry, and a frozen dataclass' ``__init__``
    (an ``object.__setattr__`` per field) made ``advance`` cost 3.0 us a row
    (against 1.0 us now, docs/BENCHMARKS.md).
    """

    url: str
    job: str
    at: datetime
    outcome: str
    status: int | None
    etag: str | None
    last_modified: str | None
    digest: str | None
    raw: bytes
    # ``at`` as the entry wrote it, when that is already the canonical text
    # (SQLite stores it as is instead of formatting ``at`` again); else "".
    at_text: str = ""


class PageRow(NamedTuple):
    """A row of ``pages`` (the spider is the store's)."""

    url: str
    job: str
    status: int | None
    fetched_at: datetime
    outcome: str
    etag: str | None
    last_modified: str | None
    digest: str | None
    changes: int
    failures: int
    interval: float
    next_due: datetime | None

    def page_state(self) -> dict[str, Any]:
        """What a revisit of this URL carries (``meta.PAGE_STATE``)."""
        return {
            "etag": self.etag,
            "last_modified": self.last_modified,
            "digest": self.digest,
            "fetched_at": self.fetched_at.isoformat(timespec="microseconds"),
            "interval": self.interval,
            "changes": self.changes,
            "failures": self.failures,
        }


def _text(obj: dict[str, Any], name: str, limit: int = _MAX_TEXT) -> str | None:
    value = obj.get(name)
    if value is None:
        return None
    if type(value) is not str or not value or len(value) > limit or "\x00" in value:
        raise BadPageEntry(f"page entry: '{name}' must be a non-empty string without NUL")
    return value


def parse_page(obj: dict[str, Any], raw: bytes) -> PageEntry:
    """The page entry in ``obj`` (a JSON object with ``"kind": "page"``), or BadPageEntry."""
    url = _text(obj, "url", _MAX_URL)
    if url is None:
        raise BadPageEntry("page entry without 'url'")
    job = _text(obj, "job", 64) or DEFAULT_JOB
    outcome = obj.get("outcome")
    if outcome not in OUTCOMES:
        raise BadPageEntry(f"page entry: unknown outcome {outcome!r}")
    status = obj.get("status")
    if status is not None and (type(status) is not int or not 100 <= status <= 999):
        raise BadPageEntry(f"page entry: status {status!r} is not an HTTP status")
    at = obj.get("at")
    try:
        moment = datetime.fromisoformat(at) if type(at) is str else None
    except ValueError:
        moment = None
    if moment is None:
        raise BadPageEntry(f"page entry: 'at' is not an ISO-8601 time: {at!r}")
    assert isinstance(at, str)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    elif moment.tzinfo is not UTC:
        moment = moment.astimezone(UTC)
    return PageEntry(
        url,
        job,
        moment,
        str(outcome),
        status,
        _text(obj, "etag"),
        _text(obj, "last_modified"),
        _text(obj, "digest"),
        raw,
        at if len(at) == 32 and CANONICAL_TIME.fullmatch(at) else "",
    )


def advance(prev: PageRow | None, entry: PageEntry, config: RecrawlConfig) -> PageRow | None:
    """The row after ``entry``; None when the row already holds a fetch as new or newer.

    - ``fetched``: its validators and digest replace the row's; it is a change
      when the row had a digest and this one differs;
    - ``not_modified``: unchanged; a validator the 304 sent replaces the row's;
    - ``redirect``: neither a change nor a failure; the row's content is kept;
    - ``fetch_error``, ``blocked``, ``dead_letter``: one more failure in a row;
      the row's validators and digest are kept for the next revisit.

    The interval is RECRAWL_AFTER, or with RECRAWL_ADAPTIVE the row's moved
    by a fetch that answered (``fetched``, ``not_modified``); the URL is due
    that long after this fetch (never, with RECRAWL_AFTER 0).
    """
    if prev is not None and entry.at <= prev.fetched_at:
        return None
    outcome = entry.outcome
    answered = outcome in ANSWERED
    if prev is None:
        # A URL's first row (a first crawl: every entry).
        changes, failures = 0, 0 if answered else 1
        etag, last_modified, digest = entry.etag, entry.last_modified, entry.digest
        interval = config.first_interval()
    else:
        changed = outcome == FETCHED and prev.digest is not None and entry.digest != prev.digest
        changes = prev.changes + changed
        failures = 0 if answered else prev.failures + 1
        if outcome == FETCHED:
            etag, last_modified, digest = entry.etag, entry.last_modified, entry.digest
        elif outcome == NOT_MODIFIED:
            etag = entry.etag or prev.etag
            last_modified = entry.last_modified or prev.last_modified
            digest = prev.digest
        else:
            etag, last_modified, digest = prev.etag, prev.last_modified, prev.digest
        interval = prev.interval or config.first_interval()
        if config.adaptive and outcome in (FETCHED, NOT_MODIFIED):
            interval = config.next_interval(interval, changed)
        elif not config.adaptive:
            interval = config.first_interval()
    due = entry.at + _seconds(interval) if config.revisits and interval > 0 else None
    return PageRow(
        entry.url,
        entry.job,
        entry.status,
        entry.at,
        outcome,
        etag,
        last_modified,
        digest,
        changes,
        failures,
        interval,
        due,
    )


@lru_cache(maxsize=256)
def _seconds(interval: float) -> timedelta:
    """``interval`` as a timedelta: a batch's rows share a few intervals, and
    building one cost more than the addition it serves (0.4 us against 0.03)."""
    return timedelta(seconds=interval)
