"""When a URL is due again, and how its history moves: the revisit scheduler's rules.

The page entry says what one fetch found; the row adds what follows from the
URL's history, which only the database holds: whether the content changed
since the last fetch (its digest against the row's), the count of changes,
the streak of failures, the revisit interval (fixed, or adaptive:
:func:`next_interval`) and the next due time. :func:`advance` is that rule
and :func:`due_after_push` the one for a row the scheduler has just pushed
back. They are pure, so that a test can step a clock through them
(``tests/unit/test_recrawl_freshness.py``); the db_writer reads and writes
the rows around them (``db_writer/page_store.py``, ``db_writer/revisits.py``).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from functools import lru_cache

from spiders_project.recrawl.config import RecrawlConfig
from spiders_project.recrawl.page_state import ANSWERED, FETCHED, NOT_MODIFIED
from spiders_project.recrawl.pages_row import PageEntry, PageRow


def next_interval(config: RecrawlConfig, interval: float, changed: bool) -> float:
    """The interval after a fetch that found the page ``changed`` or not.

    Fixed (RECRAWL_AFTER) unless adaptive; adaptive, as Nutch's
    AdaptiveFetchSchedule: times (1 - RECRAWL_DEC_RATE) after a change, times
    (1 + RECRAWL_INC_RATE) after none, clamped to [RECRAWL_MIN_INTERVAL,
    RECRAWL_MAX_INTERVAL], so a page that changes at every visit converges
    to the minimum and one that never does to the maximum.
    """
    if not config.adaptive:
        return config.after
    factor = (1 - config.dec_rate) if changed else (1 + config.inc_rate)
    return min(config.max_interval, max(config.min_interval, interval * factor))


def advance(prev: PageRow | None, entry: PageEntry, config: RecrawlConfig) -> PageRow | None:
    """The row after ``entry``; None when the row already holds a fetch as new or newer.

    Newer wins: an entry whose ``at`` is not after the row's ``fetched_at``
    changes nothing, so a batch replayed after a lost acknowledgement counts
    no change twice.

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
        interval = config.after
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
        interval = prev.interval or config.after
        if config.adaptive and outcome in (FETCHED, NOT_MODIFIED):
            interval = next_interval(config, interval, changed)
        elif not config.adaptive:
            interval = config.after
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


def due_after_push(row: PageRow, now: datetime) -> datetime:
    """When a row pushed back at ``now`` is due again if its fetch never reports:
    one interval later. The fetch's own entry, when it comes, sets the due time
    from the fetch's time instead (:func:`advance`)."""
    return now + _seconds(row.interval)


@lru_cache(maxsize=256)
def _seconds(interval: float) -> timedelta:
    """``interval`` as a timedelta: a batch's rows share a few intervals, and
    building one costs more than the addition it serves."""
    return timedelta(seconds=interval)
