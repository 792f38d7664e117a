"""Taking leases: one lease call to one queue, and what it gave, decoded.

Apart from the scheduler because the lease call has state of its own that
must survive a cancelled call: the hosts the last call named ready (asked
for first next time, with their delays), lease ids never reused, and the
call in flight, which ``hand_back`` still waits for at shutdown so that
the leases it took go back to their queues instead of expiring.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from scrapy import Request

from spiders_project.crawl.meta import LEASE_SHARD, LEASED_AT
from spiders_project.frontier.bad_entries import BadEntries
from spiders_project.frontier.calls import lease_call
from spiders_project.frontier.config import FrontierConfig
from spiders_project.frontier.context import WorkerRedis
from spiders_project.frontier.lease_id import NO_SHARD, Lease
from spiders_project.frontier.queue import JsonPriorityQueue
from spiders_project.keys import RedisKeys
from spiders_project.redis_access import RedisCalls, RedisUnavailable


@dataclass
class Taken:
    """What one lease call gave."""

    # The requests leased and decoded, each with its lease and whether its
    # host was at its cap (its slot's release is then urgent).
    requests: list[tuple[Request, Lease, bool]] = field(default_factory=list)
    # Spare leases (no slot: frontier/spares.py), decoded.
    spares: list[tuple[Request, Lease]] = field(default_factory=list)
    # Hosts found at their cap -> other workers waiting for them.
    contested: dict[str, int] = field(default_factory=dict)
    leased: int = 0  # leases taken, entries that could not be decoded included
    more: bool = False  # more hosts are ready in this queue: ask again
    wait_ms: int = -1  # ms until this queue's next host's turn, or -1


class LeaseTaker:
    """This worker's lease calls (``frontier/lua/lease.lua``)."""

    def __init__(
        self,
        redis: WorkerRedis,
        config: FrontierConfig,
        bad_entries: BadEntries,
        delay_ms: Callable[[str], int],
        lease_ms: int,
    ) -> None:
        self.redis = redis
        self.config = config
        self.bad_entries = bad_entries
        # The spacing of a politeness group's turns (FrontierSteps.delay_ms).
        self.delay_ms = delay_ms
        self.lease_ms = lease_ms  # FRONTIER_LEASE_TIMEOUT, as LeaseKeeper renews it
        # Hosts the last lease call of each queue (by lane prefix) named ready.
        self._candidates: dict[str, list[str]] = {}
        self._next_lease_id = 0
        self.in_flight: asyncio.Future[Any] | None = None  # the lease call in flight
        self._answered = float("-inf")  # when the last lease call answered (monotonic)
        # Queues (by lane prefix) whose last call found nothing ready and no host
        # at its cap -> when to ask again (monotonic). A worker of both lanes asked
        # its empty render queue after each HTTP lease call, one round trip each,
        # which far from Redis cost it a good share of its pages/s
        # (docs/BENCHMARKS.md, Distance).
        self._idle_until: dict[str, float] = {}

    def due(self, keys: RedisKeys) -> bool:
        """Whether to ask this queue now: not found empty within the last
        FRONTIER_EMPTY_POLL_INTERVAL (the poll of an idle worker)."""
        until = self._idle_until.get(keys.lane_prefix)
        return until is None or time.monotonic() >= until

    def wake(self) -> None:
        """New work may be in any queue (this worker enqueued, or put expired leases back)."""
        self._idle_until.clear()

    async def take(
        self,
        keys: RedisKeys,
        calls: RedisCalls,
        wanted: int,
        queue: JsonPriorityQueue,
        spares: Sequence[tuple[str, int, int, bool]] = (),
        recent: Sequence[str] = (),
    ) -> Taken:
        """Lease up to ``wanted`` requests from one queue, and the ``spares``
        (host, 0, n) asked for (``frontier/spares.py``); ``recent``: hosts of the
        HTTP queue to ask for after those the last call named ready. Raises
        RedisUnavailable."""
        prefix = keys.lane_prefix
        mine = [h for h in recent if self.redis.keys.for_host(h).lane_prefix == prefix]
        extra = {host: (n, holds) for host, _, n, holds in spares if host in mine}
        # The hosts the last call named ready first, in the ready-set's order
        # (hosts take turns), then ours; with nothing wanted, ours for spares only.
        if wanted <= 0 and not extra:
            return Taken()  # nothing to ask this queue for
        order = [*self._candidates.get(prefix, []), *mine] if wanted > 0 else list(extra)
        candidates: list[tuple[str, int] | tuple[str, int, int, bool]] = []
        for h in dict.fromkeys(order):
            if h in extra:
                candidates.append((h, 0, *extra[h]))
            else:
                candidates.append((h, self.delay_ms(h)))
        first_id = self._next_lease_id
        # Never reused, even if this call's reply is lost (lua/lease.lua).
        self._next_lease_id += wanted + sum(n for n, _ in extra.values())
        # What rides with the call (a shared cookie jar's version): read by the
        # script after its leases, in its own reply.
        reads = self.redis.lease_reads(calls)
        lease_keys, args = lease_call(
            keys,
            wanted,
            self.lease_ms,
            candidates,
            next_hosts=max(8, 2 * self.config.concurrency),
            per_host=self.config.per_host,
            owner=self.redis.lease_prefix(keys),
            first_id=first_id,
            now=self.redis.clock.arg(),
            reads=[field for read in reads for field in read.fields],
        )
        # Shielded: cancelled mid-call at shutdown, its leases still reach hand_back.
        call = calls.script(self.redis.scripts.lease, lease_keys, args, retry=False)
        self.in_flight = asyncio.ensure_future(call)
        try:
            leased, next_hosts, wait_ms, full, spare_ids, contest, values = await asyncio.shield(
                self.in_flight
            )
        except RedisUnavailable:
            self.in_flight = None
            raise
        # (Cancelled at shutdown, the call stays in in_flight for hand_back.)
        self.in_flight = None
        self._candidates[prefix] = self.bad_entries.host_names(next_hosts, keys)
        # With nothing wanted but spares, other ready hosts are not a reason to ask again.
        taken = Taken(leased=len(leased) // 3, more=wanted > 0 and bool(self._candidates[prefix]))
        taken.wait_ms = int(wait_ms)
        taken.contested = {
            h.decode(): int(n) for h, n in zip(contest[::2], contest[1::2], strict=True)
        }
        if taken.leased or taken.more or taken.wait_ms >= 0:
            self._idle_until.pop(prefix, None)
        elif wanted > 0:
            self._idle_until[prefix] = time.monotonic() + self.config.empty_poll_interval
        spare_ids = set(spare_ids)
        # Every lease of this reply was taken before now: what reads Redis for
        # one of them (a shared cookie jar) starts after this (crawl/meta.py).
        # Never the time of an earlier reply (a coarse clock), so that what
        # rode with one call (LeaseRead) never passes for another's.
        answered = self._answered = max(time.monotonic(), math.nextafter(self._answered, math.inf))
        for read in reads:
            n = len(read.fields)
            read.answered(answered, values[:n] if n else None)
            values = values[n:]
        for lease_id, member, host in zip(leased[::3], leased[1::3], leased[2::3], strict=True):
            lease = Lease.of(lease_id, member, host.decode())
            request = self.bad_entries.decode(queue, lease)
            if request is None:
                continue
            request.meta[LEASED_AT] = answered
            if lease.shard != NO_SHARD:
                # Its page's items go to this shard, with its ack (page_shards.py).
                request.meta[LEASE_SHARD] = lease.shard
            if lease_id in spare_ids:
                taken.spares.append((request, lease))
            else:
                taken.requests.append((request, lease, host in full))
        return taken
