"""What a URL's last fetch left, as a revisit request carries it (``meta.PAGE_STATE``).

The db_writer's revisit scheduler reads a due row of the ``pages`` table and
pushes it back as a JSON seed with a ``"revisit"`` field holding this state;
the seed reader checks it here (:func:`check_page_state`) before it becomes
``meta.PAGE_STATE``, and the conditional-request middleware turns it into
``If-None-Match`` / ``If-Modified-Since`` (:func:`validator_headers`). The
outcomes of a fetch, as the ``pages`` table's ``outcome`` column holds them,
are named here too, with the one rule that sorts an answer into them
(:func:`outcome_of`). Whether an answer is unchanged against this state is
``recrawl.unchanged``'s. Stdlib only: the seed reader uses it.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

# The outcome of one fetch, the `pages` table's `outcome` column.
FETCHED = "fetched"  # an answer the spider saw (2xx, or a 4xx/5xx no retry took)
NOT_MODIFIED = "not_modified"  # a 304 to a conditional request
REDIRECT = "redirect"  # a 3xx whose target was fetched as a request of its own
FETCH_ERROR = "fetch_error"  # no answer (connection, timeout) or a 5xx / 4xx
BLOCKED = "blocked"  # an answer BAN_HTTP_CODES / BAN_BODY_PATTERNS call a block
DEAD_LETTER = "dead_letter"  # retries used up: kept in <spider>:dead
OUTCOMES = frozenset({FETCHED, NOT_MODIFIED, REDIRECT, FETCH_ERROR, BLOCKED, DEAD_LETTER})
# Outcomes that say the site answered with the page (the failure streak ends).
ANSWERED = frozenset({FETCHED, NOT_MODIFIED, REDIRECT})

# The fields of a PAGE_STATE and what each may hold.
_TEXT = ("etag", "last_modified", "digest", "fetched_at")
_NUMBERS = ("interval",)
_COUNTS = ("changes", "failures")
FIELDS = frozenset((*_TEXT, *_NUMBERS, *_COUNTS))
# A validator longer than this is not sent back (a server's ETag is short).
MAX_VALIDATOR = 1024


class InvalidPageState(ValueError):
    """A ``"revisit"`` value that is not a page state; the message says why."""


def check_page_state(value: Any) -> dict[str, Any]:
    """``value`` if it is a page state (every field optional, no other), else raise.

    Text fields are strings (or null) without NUL or line breaks (they go
    into request headers), ``interval`` a number >= 0, the counts integers >= 0.
    """
    if not isinstance(value, dict):
        raise InvalidPageState("revisit must be a JSON object")
    unknown = set(value) - FIELDS
    if unknown:
        raise InvalidPageState(f"revisit has unknown fields: {sorted(unknown)}")
    for name in _TEXT:
        text = value.get(name)
        if text is None:
            continue
        if not isinstance(text, str) or len(text) > MAX_VALIDATOR:
            raise InvalidPageState(f"revisit {name} must be a string of at most {MAX_VALIDATOR}")
        if any(c in text for c in "\x00\r\n"):
            raise InvalidPageState(f"revisit {name} contains a control character")
    for name in _NUMBERS:
        number = value.get(name)
        if number is not None and (
            not isinstance(number, int | float) or isinstance(number, bool) or not number >= 0
        ):
            raise InvalidPageState(f"revisit {name} must be a number >= 0")
    for name in _COUNTS:
        count = value.get(name)
        if count is not None and (
            not isinstance(count, int) or isinstance(count, bool) or count < 0
        ):
            raise InvalidPageState(f"revisit {name} must be an integer >= 0")
    return value


def validator_headers(state: Any) -> dict[str, str]:
    """The conditional headers a revisit of ``state`` sends: ``If-None-Match``
    from its ETag, ``If-Modified-Since`` from its Last-Modified (as the server
    sent them, RFC 9110 13.1); none for a state without them or not a state."""
    if not isinstance(state, dict):
        return {}
    headers = {}
    etag = state.get("etag")
    if isinstance(etag, str) and etag and len(etag) <= MAX_VALIDATOR:
        headers["If-None-Match"] = etag
    modified = state.get("last_modified")
    if isinstance(modified, str) and modified and len(modified) <= MAX_VALIDATOR:
        headers["If-Modified-Since"] = modified
    if any(not v.isascii() or any(c in v for c in "\x00\r\n") for v in headers.values()):
        return {}  # sent back as the server sent it, or not at all
    return headers


def outcome_of(status: int, *, blocked: bool, conditional: bool) -> str:
    """The outcome of an answer with ``status``: a block, a 304 to a conditional
    request, a redirect, an error status (>= 400, retried or not), or fetched."""
    if blocked:
        return BLOCKED
    if status == 304 and conditional:
        return NOT_MODIFIED
    if 300 <= status < 400:
        return REDIRECT
    if status >= 400:
        return FETCH_ERROR
    return FETCHED


def last_fetched(state: Any) -> datetime | None:
    """When the last fetch was (``fetched_at``, ISO 8601; UTC when it names no
    zone), or None for a state without a time that reads."""
    fetched_at = state.get("fetched_at") if isinstance(state, Mapping) else None
    if not isinstance(fetched_at, str):
        return None
    try:
        when = datetime.fromisoformat(fetched_at.replace("Z", "+00:00"))
    except ValueError:
        return None
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when
