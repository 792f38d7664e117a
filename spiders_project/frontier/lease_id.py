"""A lease, and the format of its id: built and parsed here only.

``lua/lease.lua`` names each lease ``<prefix>/<n>``: the prefix is what
:func:`prefix` gives for the queue leased from, and ``n`` a number the caller
never passes twice (``taking.py``). The prefix is the owner, the worker's run
that took the lease (``WorkerRedis.lease_owner``: host, pid and a random
part), then ``@<shard>`` when the frontier is sharded and ``+<lane>`` for a
lane other than HTTP, so that a lease id alone says which queue to ack, renew
or hand it back to. The scripts name a worker by its prefix (``lua/lease.lua``'s
cap waiters), and ``lua/ack.lua`` reads it back from an id.
"""

from __future__ import annotations

from dataclasses import dataclass

from spiders_project.keys import HTTP, LANES

# The shard of a lease whose id names none: the frontier is not sharded, and
# its queues are in the spider's own slot (RedisKeys.shard's -1).
NO_SHARD = -1


@dataclass(frozen=True, slots=True)
class LeaseId:
    """What a lease id says: who took it, from which queue, and its number."""

    owner: str  # the worker's run that took it (WorkerRedis.lease_owner)
    shard: int  # the frontier shard whose queue gave it, or NO_SHARD
    lane: str  # the lane of that queue (keys.LANES)
    n: int  # never the same twice for one owner


@dataclass(frozen=True, slots=True)
class Lease:
    """A request this worker leased: its id, what the id says, and the request as stored."""

    id: bytes  # as lua/lease.lua wrote it; acks, renewals and hand-backs name it
    request: bytes  # the request as its queue held it (decoded by the queue's codec)
    host: str  # the host whose queue gave it (its cap slot and politeness group)
    owner: str  # as in LeaseId
    shard: int
    lane: str

    @classmethod
    def of(cls, lease_id: bytes, request: bytes, host: str) -> Lease:
        """The lease ``lua/lease.lua`` returned as (id, request, host)."""
        owner, shard, lane, _ = _parts(lease_id)
        return cls(lease_id, request, host, owner, shard, lane)


def prefix(owner: str, shard: int, lane: str) -> str:
    """What ``lua/lease.lua`` puts before ``/<n>`` in its ids (its ARGV[6]):
    ``owner``, then ``@<shard>`` unless NO_SHARD, ``+<lane>`` unless HTTP."""
    named = owner if shard == NO_SHARD else f"{owner}@{shard}"
    return named if lane == HTTP else f"{named}+{lane}"


def build(owner: str, shard: int, lane: str, n: int) -> str:
    """The id ``lua/lease.lua`` gives lease ``n`` of ``prefix(owner, shard, lane)``."""
    return f"{prefix(owner, shard, lane)}/{n}"


def parse(lease_id: bytes | str) -> LeaseId:
    """What ``lease_id`` says; raises ValueError if it is not ``<prefix>/<n>``."""
    return LeaseId(*_parts(lease_id))


def _parts(lease_id: bytes | str) -> tuple[str, int, str, int]:
    text = lease_id.decode() if isinstance(lease_id, bytes) else lease_id
    owner, slash, n = text.rpartition("/")
    if not slash or not n.isdigit():
        raise ValueError(f"not a lease id (<prefix>/<n>): {text!r}")
    head, plus, lane = owner.rpartition("+")
    if plus and lane in LANES:
        owner = head
    else:
        lane = HTTP
    head, at, shard = owner.rpartition("@")
    if at and shard.isdigit():
        return head, int(shard), lane, int(n)
    # No shard (an "@" in the host's name is not one).
    return owner, NO_SHARD, lane, int(n)
