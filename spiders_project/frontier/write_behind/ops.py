"""The writes the batcher buffers: one type per op, each of one kind.

A tick sends one group of commands per kind (``transaction.group``): the
prior writes first, then all new requests and seed rejections in one enqueue
script per lane, all items in one RPUSH (per slot), all acks, releases and
transfers in one ack script per lane, then the pushes and the other commands. What Redis
refuses inside EXEC fails a kind whole (``refusals.py``), so a kind is also
what is kept and sent again.

They are built once per link, item and ack, so plain slots dataclasses: a
frozen one costs several times as much to build (``object.__setattr__`` per
field), and nothing changes an op once appended (``slots.by_slot`` sends a
replaced copy).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from spiders_project.frontier.lease_id import NO_SHARD, Lease
from spiders_project.frontier.outcomes import Outcome
from spiders_project.keys import HTTP

# Op kinds; a tick sends one group of commands per kind.
ENQUEUE, ITEM, ACK, PUSH, COMMAND = "enqueue", "item", "ack", "push", "command"
PRIOR = "prior"


@dataclass(slots=True)
class Enqueue:
    """Queue a request (``lua/enqueue.lua``), unless its fingerprint was seen."""

    kind: ClassVar[str] = ENQUEUE
    host: str  # its politeness group: the host queue it goes to
    fingerprint: str  # a seen-set token (seen.SeenConfig.token), marked ("!", "~") or ""
    priority: int
    payload: bytes  # the request, encoded (frontier/queue.py)
    # A seed's start_urls entry: queued only if this claims it (a shard: its digest).
    seed: bytes = b""
    wait_ms: int = 0  # not to be fetched before this many ms from now (a retry)
    lane: str = HTTP  # the frontier's HTTP or render queue (keys.LANES)


@dataclass(slots=True)
class RejectSeed:
    """Move a start_urls entry that is not a valid seed to start_urls:rejected
    (the enqueue script of the spider's own slot, with no request)."""

    kind: ClassVar[str] = ENQUEUE
    lane: ClassVar[str] = HTTP
    seed: bytes


@dataclass(slots=True)
class Item:
    """An item (or a page-state entry) for the db_writers: RPUSH onto an item buffer,
    the one of its page's frontier shard (``page_shards.py``; sent with the acks, in
    the shard's slot), or the spider's own with ``NO_SHARD`` (one Redis, no page)."""

    kind: ClassVar[str] = ITEM
    payload: bytes
    shard: int = NO_SHARD


@dataclass(slots=True)
class Ack:
    """End a lease of this worker for good (``lua/ack.lua``), counting its outcome for its job."""

    kind: ClassVar[str] = ACK
    lease: Lease
    outcome: Outcome
    items: int = 0  # items scraped from its page (Outcome.PAGE)


@dataclass(slots=True)
class Release:
    """Give back the cap slot of a lease whose download ended; the lease stays (``lua/ack.lua``)."""

    kind: ClassVar[str] = ACK
    lease: Lease


@dataclass(slots=True)
class Transfer:
    """Pass the cap slot of a lease whose download ended to a spare lease of its host."""

    kind: ClassVar[str] = ACK
    lease: Lease
    spare: Lease


@dataclass(slots=True)
class Push:
    """LPUSH ``value`` onto ``key`` (rejects, dead letters)."""

    kind: ClassVar[str] = PUSH
    key: str
    value: bytes


@dataclass(slots=True)
class Prior:
    """A write the tick's other writes may depend on, visible no later than they are.

    A shared cookie jar's update (cookies/store.py) is one: the links of the
    page that set a session cookie must not be leased before the jar holds
    it. On one Redis it travels in the tick's MULTI/EXEC with the rest; on a
    sharded frontier the tick's prior writes go in a step of their own, before
    the links' (``RedisBatcher._flush_sharded``). ``args`` as sent (a script:
    EVAL by source, its first key naming its slot); ``tag`` lets whoever
    appended it know it once delivered (``RedisBatcher.priors_delivered``).
    """

    kind: ClassVar[str] = PRIOR
    args: tuple[Any, ...]
    tag: object = None


@dataclass(slots=True)
class Command:
    """Any other Redis command (a script: EVAL by source), ``args`` as sent."""

    kind: ClassVar[str] = COMMAND
    args: tuple[Any, ...]


Op = Enqueue | RejectSeed | Item | Ack | Release | Transfer | Push | Prior | Command
