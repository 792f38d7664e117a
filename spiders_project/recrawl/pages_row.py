"""What travels to the ``pages`` table and what a row of it holds.

A worker writes one *page entry* per fetch outcome into ``<spider>:items``
(:func:`page_entry`, through the write batcher, as items go)::

    {"kind": "page", "url": "https://...", "job": "default", "at": "2026-...+00:00",
     "outcome": "fetched", "status": 200, "etag": "...", "last_modified": "...",
     "digest": "sha1:..."}

The db_writer routes an entry whose ``"kind"`` is :data:`PAGE_KIND` here
(:func:`parse_page`, which refuses anything else with :class:`BadPageEntry`),
and keeps one :class:`PageRow` per (spider, url); ``recrawl.revisit_rules``
says how an entry moves a row. A due row goes back to the workers as a
seed carrying its page state (:func:`revisit_seed`, :meth:`PageRow.page_state`;
``recrawl.page_state`` checks it on arrival). The encoder and the decoder
live side by side so that the two ends of ``<spider>:items`` cannot drift
apart; how rows are stored (SQL, column types) is the db_writer's
(``db_writer/page_store.py``).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any, NamedTuple

import orjson

from spiders_project.keys.jobs import DEFAULT_JOB
from spiders_project.recrawl.page_state import OUTCOMES

# The value of "kind" that routes an entry of <spider>:items to the `pages` table.
PAGE_KIND = "page"
_MAX_TEXT = 1024
_MAX_URL = 8192
# ISO-8601 UTC with microseconds: the one form times are stored in as text
# (SQLite), and the form workers write.
CANONICAL_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}\+00:00")


def page_entry(
    url: str,
    job: str,
    at: str,
    outcome: str,
    *,
    status: int | None = None,
    etag: str | None = None,
    last_modified: str | None = None,
    digest: str | None = None,
) -> bytes:
    """One page entry as a worker writes it, fields that are None left out."""
    entry: dict[str, Any] = {"kind": PAGE_KIND, "url": url, "job": job, "at": at}
    entry["outcome"] = outcome
    for name, value in (
        ("status", status),
        ("etag", etag),
        ("last_modified", last_modified),
        ("digest", digest),
    ):
        if value is not None:
            entry[name] = value
    return orjson.dumps(entry)


class BadPageEntry(ValueError):
    """Why a page entry is rejected."""


class PageEntry(NamedTuple):
    """One fetch outcome, as a worker reported it; ``raw`` as it was in Redis.

    This and :class:`PageRow` are named tuples, not frozen dataclasses: a
    batch builds one of each per entry, and a frozen dataclass' ``__init__``
    (an ``object.__setattr__`` per field) cost ``advance`` most of its time
    (docs/BENCHMARKS.md, "db_writer throughput").
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


def revisit_seed(row: PageRow) -> bytes:
    """The start_urls entry that revisits ``row``'s URL with its last fetch's state
    (``scope.seeds`` reads its ``"revisit"`` into ``meta.PAGE_STATE``)."""
    seed: dict[str, object] = {"url": row.url, "revisit": row.page_state()}
    if row.job != DEFAULT_JOB:
        seed["job"] = row.job
    return orjson.dumps(seed)


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
