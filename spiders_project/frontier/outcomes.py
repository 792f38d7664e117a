"""How a leased request ended, as its ack tells its job (``lua/ack.lua``).

The frontier acks leases without knowing what features did with them; a
feature that ends a request in a way its job counts (a dead letter) says so
with a Scrapy signal (:data:`request_dead_lettered`,
:data:`request_refused`), and the frontier's
handoff sends the outcome with the lease's ack. The ack script counts it only
as it removes the lease, so a resent transaction counts nothing twice.

Each ack carries an :class:`Outcome`; ``lua/ack.lua`` reads it as a number,
and :func:`ack_code` is the one place that maps one to the other.
"""

from __future__ import annotations

import enum


class Outcome(enum.Enum):
    """How a leased request ended, as its ack tells its job."""

    # No response of it reached the spider (its download failed, a retry or a
    # redirect took over, a bad entry set aside): its job counts no page.
    NO_PAGE = "no page"
    # A response reached the spider: its job counts a page, with its items.
    PAGE = "page"
    # It failed for good: its job counts a dead letter, no page.
    DEAD_LETTER = "dead letter"
    # Refused after its lease (robots.txt): its job counts it refused.
    REFUSED = "refused"
    # A frontier step dropped it after its lease (a blocked host's, a cancelled
    # job's): its job counts it purged, like the queued requests the block dropped.
    DROPPED = "dropped"
    # Held back before its download (its job was paused): never acked; the
    # handoff puts its lease back in its queue instead.
    HELD = "held"


# lua/ack.lua's number for each outcome it counts other than a page (whose
# number is its item count, >= 0): the script's ``finish`` reads these.
_ACK_CODES = {Outcome.DEAD_LETTER: -1, Outcome.REFUSED: -2, Outcome.DROPPED: -3}


def ack_code(outcome: Outcome, items: int = 0) -> int | None:
    """The number ``lua/ack.lua`` counts for a lease that ended with ``outcome``
    (``items``: those scraped from its page): None for NO_PAGE, whose lease id
    goes alone. Raises ValueError for HELD, which is never acked."""
    if outcome is Outcome.PAGE:
        return items
    if outcome is Outcome.NO_PAGE:
        return None
    code = _ACK_CODES.get(outcome)
    if code is None:
        raise ValueError(f"{outcome} is never acked")
    return code


# Scrapy signal, sent with ``request`` when a dead letter of it is written.
request_dead_lettered = object()

# Scrapy signal, sent with ``request`` when it is refused after its lease (robots.txt).
request_refused = object()

# Scrapy signal, sent with ``request`` and ``salt`` (bytes: its job) when a
# feature refuses a link before it is queued (a seed's scope): the frontier
# counts it refused for its job, once per URL and salt (frontier/refused.py).
link_refused = object()

# Scrapy signals, sent with ``request`` by a downloader middleware that stops a
# leased request just before its download: ``request_held`` (its job was paused:
# the lease goes back to its queue, nothing is counted) and ``request_dropped``
# (its job was cancelled: counted purged, like Outcome.DROPPED).
request_held = object()
request_dropped = object()

# Scrapy signal, sent with ``request`` when a downloader middleware ends a
# fetched response before the spider because its page did not change since the
# last fetch (a 304, or the same content digest: recrawl/middleware.py). No
# response reaches the spider, yet its lease's job counts a page fetched, with
# no item.
request_unchanged = object()
