"""The Redis side of the db_writer: join, take, acknowledge, heartbeat, take over.

Any number of db_writers drain one item buffer at once. Each has an id
unique to its process run (uuid4; never a hostname and pid, which replicas
in containers share) and, beside each buffer it drains:

- its own processing list ``<spider>:items:processing:<id>``: entries move
  there from ``<spider>:items`` when taken and leave it only after their batch
  is committed, so an entry is in Redis until it is in the database (at
  least once). Only its writer appends to it, so the batch in hand is always
  its first entries and is acknowledged by position;
- its entry in the writers' hash ``<spider>:db_writer:writers`` (id -> entries
  in its processing list, which the scripts keep exact, so the monitor and
  ``--exit-when-empty`` read every writer's count in one call);
- its lease ``<spider>:db_writer:lease:<id>``, set again with a TTL of
  DB_WRITER_LOCK_TTL at every batch and heartbeat.

Every writer looks at the others' leases every quarter of that TTL. A writer
whose lease is gone (killed, or stalled that long) has its processing list
moved to the tail of the looker's and leaves the hash, atomically
(``adopt.lua``); take, ack and heartbeat check first that their writer is
still in the hash, so one that comes back after that changes nothing. A
batch in hand is thus written again by at most one other writer, as an
upsert: nothing is lost and nothing is stored twice.

The previous release's one processing list ``<spider>:items:processing`` is
taken over the same way once its lone writer's lock ``<spider>:db_writer:lock``
is gone.

Every call goes through the process' one call path
(:class:`~spiders_project.redis_access.SyncRedisCalls`), which classifies
errors, backs off and logs Redis' state changes. The scripts carry
``allow-oom``: they keep memory level or free it, and the db_writer, the one
process that frees Redis memory, must start and drain while Redis is full.
Calls that can be repeated safely (reads, join, heartbeat) retry until Redis
answers, sleeping with the call path's sleep, which ends the wait when a stop
is requested. Take, ack and adopt are tried once (``retry=False``): one whose
reply was lost may have moved entries, and the writer then reads its
processing list again from its head instead of repeating the call.

A spider has one buffer, ``<spider>:items``, and on a sharded frontier (a
Redis Cluster) one more per shard, ``{<spider>/<n>}:items``, on that shard's
master, where the workers buffer the items of its hosts' pages
(``keys/db_writers.item_buffers``; the count is the one the spider's first
process recorded). Each buffer's keys name what a writer keeps beside it, in
the buffer's slot, so each script touches one slot; the queue takes a batch
from one buffer at a time and acknowledges it there, and a writer joins,
beats and looks for gone writers beside every buffer.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from spiders_project.keys import RedisKeys
from spiders_project.keys.db_writers import filling, item_buffers, lease, processing_of, writers
from spiders_project.read_model.replies import hash_fields, text
from spiders_project.read_model.writers import held_by_writers
from spiders_project.redis_access import RedisUnavailable, SyncRedisCalls, load_lua

logger = logging.getLogger(__name__)

LUA_DIR = Path(__file__).with_name("lua")

# How often an idle writer looks at the buffer while Redis refuses writes
# (see ItemQueue.wait): 5 LLEN per second, and an item waits at most 0.2 s.
REFUSED_POLL = 0.2
# A dead writer's batch must be taken over within DB_WRITER_LOCK_TTL of its
# death. So its lease lives LEASE_SHARE of the TTL after each renewal, renewed
# every BEATS_PER_TTL-th of the TTL (and at every batch): two heartbeats can be
# lost before it expires. The others look for gone writers every
# LOOKS_PER_TTL-th, between their own batches: a dead writer's batch is taken
# over 1/2 + 1/5 of the TTL after its last renewal, plus the batch the taker
# was writing (under a second), which leaves room within the TTL.
LEASE_SHARE = 0.5
BEATS_PER_TTL = 6
LOOKS_PER_TTL = 5


class Taken(NamedTuple):
    """What a take moved; ``others_filling``: it moved nothing because another
    writer is filling a batch from the buffer (a take that starts a batch only)."""

    entries: list[bytes]
    others_filling: bool = False


class LeaseLost(Exception):
    """Another writer took this writer's batch over: the batch in hand must not be acknowledged."""


class ItemQueue:
    """One writer's view of a spider's item buffers, its processing lists and its lease."""

    def __init__(
        self,
        calls: SyncRedisCalls,
        keys: RedisKeys,
        lease_ttl: float,
        *,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.calls = calls
        self.client = calls.client
        self.keys = keys
        self.buffers = item_buffers(keys)
        self.writer = uuid.uuid4().hex
        self.lease_ttl_ms = int(lease_ttl * LEASE_SHARE * 1000)
        self._beat_every = lease_ttl / BEATS_PER_TTL
        self._look_every = lease_ttl / LOOKS_PER_TTL
        self._monotonic = monotonic
        self._beaten_at = float("-inf")
        self._looked_at = float("-inf")
        self._join = load_lua(LUA_DIR, "join")
        self._beat = load_lua(LUA_DIR, "beat")
        self._leave = load_lua(LUA_DIR, "leave")
        self._adopt = load_lua(LUA_DIR, "adopt")
        self._take = load_lua(LUA_DIR, "take")
        self._ack = load_lua(LUA_DIR, "ack")

    # --- names ----------------------------------------------------------------

    @property
    def buffer_names(self) -> str:
        """The item buffers this writer drains, for its lines."""
        return ", ".join(buffer.items for buffer in self.buffers)

    def processing(self, buffer: RedisKeys) -> str:
        """This writer's processing list beside ``buffer``."""
        return processing_of(buffer, self.writer)

    def lease(self, buffer: RedisKeys) -> str:
        """This writer's lease beside ``buffer``."""
        return lease(buffer, self.writer)

    # --- being one of the writers -----------------------------------------------

    def join(self) -> int:
        """Become one of the writers of every buffer; the entries already in this
        writer's processing lists (none, unless Redis lost the writers' hash)."""
        held = 0
        for buffer in self.buffers:
            held += self.calls.script(
                self._join,
                [writers(buffer), self.lease(buffer), self.processing(buffer)],
                [self.writer, self.lease_ttl_ms],
            )
        self._beaten_at = self._monotonic()
        self._looked_at = float("-inf")  # a new writer looks for gone ones at once
        return held

    def heartbeat(self) -> None:
        """Renew the leases when a third of their TTL has passed; raise LeaseLost if
        another writer took this one's batch over."""
        now = self._monotonic()
        if now - self._beaten_at < self._beat_every:
            return
        for buffer in self.buffers:
            beat = [writers(buffer), self.lease(buffer)]
            if not self.calls.script(self._beat, beat, [self.writer, self.lease_ttl_ms]):
                raise LeaseLost(writers(buffer))
        self._beaten_at = now

    def forget_heartbeat(self) -> None:
        """Make the next :meth:`heartbeat` renew the leases (after Redis was away)."""
        self._beaten_at = float("-inf")

    def leave(self) -> int:
        """A clean stop: out of the writers' hash if nothing is left in hand, the
        lease dropped either way, so another writer takes over at its next look
        what is left. Tried once: when Redis is away, the lease expires by itself.
        Returns the entries left for another writer."""
        left = 0
        for buffer in self.buffers:
            left += self.calls.script(
                self._leave,
                [writers(buffer), self.lease(buffer), self.processing(buffer)],
                [self.writer],
                retry=False,
            )
        return int(left)

    def take_over_gone(self, *, now: bool = False) -> int:
        """Every quarter of the lease TTL (or ``now``): move the processing list of
        each writer whose lease is gone, and the previous release's list once its
        lock is gone, to the tail of this writer's. The number of entries moved."""
        at = self._monotonic()
        if not now and at - self._looked_at < self._look_every:
            return 0
        self._looked_at = at
        return sum(self._take_over(buffer) for buffer in self.buffers)

    def _take_over(self, buffer: RedisKeys) -> int:
        found, legacy, legacy_lock = self.calls.pipelined(
            "db_writers",
            [
                ("HGETALL", writers(buffer)),
                ("LLEN", buffer.items_processing),
                ("GET", buffer.db_writer_lock),
            ],
        )
        others = [text(name) for name in hash_fields(found) if text(name) != self.writer]
        gone: list[tuple[str, str, str]] = []
        if others:
            alive = self.calls.pipelined(
                "db_writer leases", [("GET", lease(buffer, w)) for w in others]
            )
            for writer, lives in zip(others, alive, strict=True):
                if lives is None:
                    gone.append((writer, processing_of(buffer, writer), lease(buffer, writer)))
        if legacy and not legacy_lock:
            gone.append(("", buffer.items_processing, buffer.db_writer_lock))
        moved = 0
        for writer, processing, its_lease in gone:
            taken = self.calls.script(
                self._adopt,
                [processing, its_lease, writers(buffer), self.processing(buffer)],
                [writer, self.writer],
                retry=False,
            )
            if taken is None:
                raise LeaseLost(writers(buffer))
            if taken > 0:
                logger.info(
                    "took over %d entries of %s, whose %s is gone; writing them",
                    taken,
                    f"db_writer {writer}" if writer else processing,
                    "lease" if writer else "lock",
                )
                moved += taken
        return moved

    # --- entries --------------------------------------------------------------

    def take(self, buffer: RedisKeys, count: int, *, fill_for: float = 0.0) -> Taken:
        """Move up to ``count`` entries of ``buffer``, oldest first, into this
        writer's processing list. ``fill_for``: this take starts a batch that
        the writer may fill for so many seconds; if it finds fewer than
        ``count`` entries, the other writers leave the buffer to it meanwhile,
        and if another writer is filling one, it moves nothing (``take.lua``)."""
        processing = self.processing(buffer)
        moved: list[int] | int | None = self.calls.script(
            self._take,
            [buffer.items, processing, writers(buffer), filling(buffer)],
            [self.writer, count, int(fill_for * 1000)],
            retry=False,
        )
        if moved is None:
            raise LeaseLost(writers(buffer))
        if isinstance(moved, int):
            return Taken([], others_filling=True)
        n, held = moved
        if not n:
            return Taken([])
        # Only this writer appends to its list and only its ack trims it, so
        # these are the entries just moved; if another writer took the list over
        # meanwhile, the ack says so (LeaseLost) and nothing is acknowledged.
        entries: list[bytes] = self.calls.command(
            "LRANGE", processing, held, held + n - 1, writes=False
        )
        return Taken(entries)

    def wait(self, buffer: RedisKeys, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds until ``buffer`` has an entry; leave it there.

        While Redis takes writes: BLMOVE from the head of the list back to its
        head, a rotation of one element. Nothing moves, but the call blocks
        like BLPOP and returns as soon as a producer pushes (every writer
        blocked on the buffer wakes; each then takes what it can). Taking
        stays with :meth:`take`, which checks this writer is still one of the
        buffer's writers.

        While Redis refuses writes (OOM, READONLY), BLMOVE is refused too:
        every blocking list command (BLPOP, BLMOVE, BLMPOP, ...) removes or
        moves an element, so Redis flags them all as writes, and there is no
        read-only way to block on a list. The buffer is polled with LLEN every
        REFUSED_POLL seconds instead. BLMOVE is still tried first at each
        wait: it is the call whose success shows Redis takes writes again
        (the allow-oom scripts succeed either way), and it costs one refused
        round trip per poll.
        """
        timeout = max(round(timeout, 3), 0.001)  # 0 would mean forever
        try:
            moved = self.calls.call(
                "BLMOVE items",
                lambda: self.client.blmove(
                    buffer.items,
                    buffer.items,
                    # Redis takes fractional seconds; redis-py's hint says int.
                    timeout,  # type: ignore[arg-type]
                    "LEFT",
                    "LEFT",
                ),
                retry=False,
            )
            return moved is not None
        except RedisUnavailable:
            if not self.calls.state.connected:
                raise
        # A plain sleep, not the call path's (which ends at a stop request): a
        # writer stopping warm still writes the partial batch it is filling.
        time.sleep(min(timeout, REFUSED_POLL))
        return bool(self.calls.command("LLEN", buffer.items, retry=False, writes=False))

    def read_processing(self, buffer: RedisKeys, count: int) -> list[bytes]:
        """The first ``count`` entries of this writer's processing list (recovery)."""
        entries: list[bytes] = self.calls.command(
            "LRANGE", self.processing(buffer), 0, count - 1, writes=False
        )
        return entries

    def processing_length(self) -> int:
        """How many entries wait in this writer's processing lists."""
        return sum(
            int(self.calls.command("LLEN", self.processing(buffer), writes=False))
            for buffer in self.buffers
        )

    def is_empty(self) -> bool:
        """True when no buffer holds an entry and no writer's processing list does
        (a gone writer's batch counts until it is taken over and written)."""
        for buffer in self.buffers:
            items, held, legacy = self.calls.pipelined(
                "LLEN items",
                [
                    ("LLEN", buffer.items),
                    ("HGETALL", writers(buffer)),
                    ("LLEN", buffer.items_processing),
                ],
            )
            if items or legacy or held_by_writers(held):
                return False
        return True

    def ack(
        self, buffer: RedisKeys, entries: list[bytes], written: int, rejected: list[bytes]
    ) -> bool:
        """Remove the batch ``entries`` from the head of this writer's processing list
        beside ``buffer``, keep ``rejected``, count the batch, renew the lease.

        False, changing nothing, when the list does not start with the batch (a
        take whose reply was lost put entries before it): the caller reads the
        list again from its head."""
        done = self.calls.script(
            self._ack,
            [
                self.processing(buffer),
                buffer.items_rejected,
                buffer.db_writer_stats,
                writers(buffer),
                self.lease(buffer),
            ],
            [
                self.writer,
                self.lease_ttl_ms,
                len(entries),
                written,
                f"{time.time():.3f}",
                entries[0],
                entries[-1],
                *rejected,
            ],
            retry=False,
        )
        if done == -1:
            return False
        if not done:
            raise LeaseLost(writers(buffer))
        if len(self.buffers) == 1:
            self._beaten_at = self._monotonic()
        return True
