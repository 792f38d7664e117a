"""Write-behind to Redis: every write of a worker, in order, one round trip a tick.

New requests, items, acknowledgements and rejects are appended in memory by
the scheduler and the item pipeline (which never wait for Redis) and sent
together in one MULTI/EXEC every ``FRONTIER_FLUSH_INTERVAL`` (at once for a
capped host's slot, or items past ``items_limit``: ``release``, ``item``). As one
transaction carries them, the items and links a page produced reach Redis no
later than the acknowledgement of that page's lease: a worker killed at any
moment loses neither. Inside the transaction the writes are grouped by kind
(all new requests in one enqueue script, all items in one RPUSH, all releases
and acks in one ack script), keeping their order within each kind: nothing else
runs between the commands of a MULTI/EXEC, and the kinds touch different keys,
so the grouping changes what Redis does per tick, not what it ends up holding.

No op is ever dropped. When Redis is away, or refuses writes (OOM, READONLY:
Redis refuses such a transaction whole, see ``calls.refuse_guard``), or refuses
one command of the transaction (a key of the wrong type), the ops concerned
stay in memory, in their order, and are sent again after a backoff. A
transaction that was applied but whose reply was lost is sent again, which
at-least-once makes harmless: the dupefilter absorbs repeated links, the
enqueue script counts only members it really added, the db_writer upserts
repeated items, and acks of unique lease ids are idempotent.

With replicas (``REDIS_WAIT_REPLICAS``), a tick that carried requests, items
or acks counts as written only once ``WAIT`` says that many replicas have it
(fewer if the master never had that many online, none if it never had one:
``replicas.py`` says which, from the transaction's ``INFO replication`` every
``replicas.REPLICAS_EVERY`` seconds). Otherwise its ops are sent again, by
the same at-least-once rule: a failover to a replica that lacks them, or a
master cut off from its replicas, then loses nothing a worker counted done.

This module keeps the buffer of ops (one type each: ``ops.py``), the ticks and
what is delivered; a tick's commands are laid out in ``transaction.py``, what
Redis refused inside EXEC is read in ``refusals.py``, the WAIT is
``replicas.py``'s, and a sharded frontier's split by slot ``slots.py``'s.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable
from typing import Any

from spiders_project.frontier.lease_id import NO_SHARD, Lease
from spiders_project.frontier.outcomes import Outcome
from spiders_project.frontier.scripts import FrontierScripts
from spiders_project.frontier.write_behind.ops import (
    ACK,
    ENQUEUE,
    ITEM,
    PRIOR,
    Ack,
    Command,
    Enqueue,
    Item,
    Op,
    Prior,
    Push,
    RejectSeed,
    Release,
    Transfer,
)
from spiders_project.frontier.write_behind.refusals import Refusals
from spiders_project.frontier.write_behind.replicas import ReplicaWait
from spiders_project.frontier.write_behind.slots import send_by_slot, steps
from spiders_project.frontier.write_behind.transaction import (
    CONFIRMED,
    add_commands,
    enqueue_reply,
    group,
    load_by_sha,
)
from spiders_project.keys import HTTP, RedisKeys
from spiders_project.plumbing.clock import ScriptClock
from spiders_project.plumbing.tasks import spawn_loop, stop_tasks, wait_event
from spiders_project.plumbing.wiring import Subscribers
from spiders_project.redis_access import (
    ErrorKind,
    LuaScript,
    RedisCalls,
    RedisUnavailable,
    classify,
)

logger = logging.getLogger(__name__)


class RedisBatcher:
    """Buffers writes and flushes them in one transaction per tick."""

    def __init__(
        self,
        calls: RedisCalls,
        keys: RedisKeys,
        interval: float,
        clock: ScriptClock | None = None,
        seen: str = "exact",
        wait_replicas: int = 0,
        wait_timeout: float = 1.0,
        calls_for: Callable[[RedisKeys], RedisCalls] | None = None,
    ) -> None:
        self.calls = calls
        # The call path of a frontier shard's slot (sharded frontier only).
        self.calls_for = calls_for or (lambda keys: calls)
        self.client = calls.client
        self.keys = keys
        self.state = calls.state
        self.interval = interval
        self.clock = clock or ScriptClock()
        self.seen = seen  # the seen-set's mode (seen.SeenConfig.spec)
        self.scripts = FrontierScripts()
        self._ops: list[Op] = []
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        # Told (requests sent, requests enqueued) after each flush that carried requests.
        self.enqueued: Subscribers[[int, int]] = Subscribers()
        # Told after each flush that gave back cap slots or ended leases: the
        # hosts concerned may have room for new leases.
        self.slots_freed: Subscribers[[]] = Subscribers()
        # Told (seed entry, reason) for each seed this worker's flush moved to
        # start_urls:rejected: once in the cluster, even when several workers
        # read the same bad seed and all asked to reject it.
        self.seeds_rejected: Subscribers[[bytes, str]] = Subscribers()
        self._rejecting: dict[bytes, str] = {}  # seed -> why, until its script ran
        # Told the prior writes (``prior``) of each transaction Redis took,
        # so whoever appended them knows they are in.
        self.priors_delivered: Subscribers[[list[Prior]]] = Subscribers()
        # Called at the start of every flush, to add writes that are due (acks).
        self.before_flush: Subscribers[[]] = Subscribers()
        self.pending_items = 0
        # Ops ever appended / ever delivered, and an event set after each
        # delivery, for wait_flushed().
        self._appended = 0
        self._delivered = 0
        self._flushed = asyncio.Event()
        # Items in every item buffer: each one's length as last read, by slot, summed.
        self.items_backlog = 0
        self._backlogs: dict[str, int] = {}
        # Told that length after each flush (backpressure reacts at once).
        self.backlog: Subscribers[[int]] = Subscribers()
        # ITEM_BUFFER_MAX (backpressure; 0: none): items that would pass it go at
        # once, so the worker pauses near the bound whatever the tick's length.
        self.items_limit = 0
        # What Redis refused inside EXEC, and the replicas that must confirm
        # writes (REDIS_WAIT_REPLICAS; 0: none). Both log as this module.
        self._refusals = Refusals(logger)
        self._replica_wait = ReplicaWait(wait_replicas, wait_timeout, logger)

    # --- appending (never waits) ---------------------------------------------
    def _add(self, op: Op) -> None:
        self._ops.append(op)
        self._appended += 1

    def enqueue(
        self,
        host: str,
        fingerprint: str,
        priority: int,
        payload: bytes,
        seed: bytes = b"",
        wait_ms: int = 0,
        lane: str = HTTP,
    ) -> None:
        """Queue a request; with ``seed``, only if that start_urls entry is still there;
        with ``wait_ms``, not to be fetched before that many ms from now (a retry);
        in ``lane``, the frontier's HTTP or render queue (``keys.LANES``)."""
        self._add(Enqueue(host, fingerprint, priority, payload, seed, wait_ms, lane))

    def reject_seed(self, seed: bytes, reason: str) -> None:
        """Move a start_urls entry that is not a valid seed to start_urls:rejected.

        ``seeds_rejected`` hears of it once the move happened, if this worker
        was the one that made it.
        """
        self._rejecting[seed] = reason
        self._add(RejectSeed(seed))

    def item(self, payload: bytes, shard: int = NO_SHARD) -> None:
        """An entry for the item buffer of ``shard``, its page's (``page_shards.py``)."""
        self._add(Item(payload, shard))
        self.pending_items += 1
        if self.items_limit and self.items_backlog + self.pending_items > self.items_limit:
            self._wake.set()

    def ack(self, lease: Lease, outcome: Outcome = Outcome.NO_PAGE, items: int = 0) -> None:
        """End a lease of this worker for good (``lua/ack.lua``); its job counts
        ``outcome`` (``Outcome.PAGE``: a page, with ``items`` scraped from it)."""
        if outcome is Outcome.HELD:
            raise ValueError("a held lease goes back to its queue; it is never acked")
        self._add(Ack(lease, outcome, items))

    def release(self, lease: Lease, *, now: bool = False) -> None:
        """Give back the cap slot of a lease whose download ended; the lease
        stays until ``ack`` (``lua/ack.lua``).

        ``now``: its host is at its cap, so other requests of it wait for this
        slot: flush at once instead of at the next tick (one round trip, not
        up to ``FRONTIER_FLUSH_INTERVAL``). Only such releases wake the
        batcher, so an uncapped crawl keeps its batches whole.
        """
        self._add(Release(lease))
        if now:
            self._wake.set()

    def transfer(self, lease: Lease, spare: Lease) -> None:
        """Pass the cap slot of a lease whose download ended to a spare lease of
        the same host, whose download starts in its place (``lua/ack.lua``):
        the host's count stays, so nothing is urgent."""
        self._add(Transfer(lease, spare))

    def push(self, key: str, value: bytes) -> None:
        """LPUSH ``value`` onto ``key`` (rejects, dead letters)."""
        self._add(Push(key, value))

    def command(self, *args: Any) -> None:
        """Any other Redis command, sent in order with the rest."""
        self._add(Command(args))

    def script(self, script: LuaScript, keys: list[str], args: list[Any]) -> None:
        """A Lua script (EVAL by source: see ``flush``), sent in order with the rest."""
        self._add(Command(("EVAL", script.source, len(keys), *keys, *args)))

    def prior(
        self, script: LuaScript, keys: list[str], args: list[Any], tag: object = None
    ) -> None:
        """A Lua script (EVAL by source) that the writes appended after it may
        depend on: in Redis no later than they are (``ops.Prior``); ``tag`` comes
        back through ``priors_delivered`` once Redis took it."""
        self._add(Prior(("EVAL", script.source, len(keys), *keys, *args), tag))

    def __len__(self) -> int:
        return len(self._ops)

    def has_pending_requests(self) -> bool:
        return any(op.kind == ENQUEUE for op in self._ops)

    # --- flushing ---------------------------------------------------------------
    def start(self) -> None:
        self._task = spawn_loop("write batcher", self._run())

    def wake(self) -> None:
        self._wake.set()

    async def _run(self) -> None:
        while not self._closing:
            await wait_event(self._wake, self.interval)
            self._wake.clear()
            delay = await self.flush()
            if delay:
                await asyncio.sleep(delay)
        # Only close() sets _closing, and it stops this loop by cancelling it;
        # a cancellation that asyncio.timeout swallowed (Python 3.11, see
        # stop_tasks) lands here instead, which is the same shutdown.

    async def flush(self) -> float:
        """Send everything buffered; returns 0, or the backoff after a failure.

        On any failure the ops that did not reach Redis go back to the front
        of the buffer, in their order.
        """
        self.before_flush()
        if not self._ops:
            return 0.0
        ops, self._ops = self._ops, []
        if self.keys.sharded:
            return await self._flush_sharded(ops)
        kept, delay = await self._transaction(self.keys, self.calls, ops)
        self._delivered_all(ops, kept)
        return delay

    def _delivered_all(self, ops: list[Op], kept: list[Op]) -> None:
        """Put ``kept`` back in front; count the rest of ``ops`` as delivered."""
        self._ops = kept + self._ops
        self._delivered += len(ops) - len(kept)
        flushed, self._flushed = self._flushed, asyncio.Event()
        flushed.set()

    async def _flush_sharded(self, ops: list[Op]) -> float:
        """One tick over a sharded frontier: one MULTI/EXEC per slot, in up to three steps,
        each sent only once the one before is in whole (``slots.py`` says why that is safe)."""
        priors, first, second = steps(ops)
        send = functools.partial(send_by_slot, self.keys, self._transaction, self.calls_for)
        before = 0.0
        if priors:
            kept, before, _ = await send(priors)
            if kept:
                self._delivered_all(ops, kept + first + second)
                return before
        kept, delay, claims = await send(first)
        self._appended += len(claims)
        second += claims
        if kept:
            self._delivered_all(ops + claims, kept + second)
            return max(before, delay)
        kept, delay2, _ = await send(second)
        self._delivered_all(ops + claims, kept)
        return max(before, delay, delay2)

    async def _transaction(
        self, keys: RedisKeys, calls: RedisCalls, ops: list[Op], *, again: bool = True
    ) -> tuple[list[Op], float]:
        """``ops`` in one MULTI/EXEC on ``calls``: (the ops Redis did not take, backoff).

        A NOSCRIPT (``transaction.BY_SHA``) loads the scripts and sends the ops
        it failed once more, at once (``again``)."""
        groups = group(ops)
        slot = keys.frontier_prefix
        # Free ride, for backpressure: the length of the slot's item buffer (the
        # spider's own at every tick, a shard's when it carries items there).
        backlog = slot == self.keys.prefix or any(kind == ITEM for kind, _ in groups)
        pipe = calls.client.pipeline(transaction=True)
        spans, enqueued = add_commands(
            pipe, keys, groups, scripts=self.scripts, seen=self.seen, clock=self.clock
        )
        if backlog:
            pipe.llen(keys.items)
        read_replicas = self._replica_wait.read_due(slot)
        if read_replicas:
            pipe.info("replication")
        try:
            results = await calls.call(
                "MULTI/EXEC", lambda: pipe.execute(raise_on_error=False), retry=False, writes=False
            )
        except RedisUnavailable as exc:
            return ops, exc.delay
        except Exception:  # noqa: BLE001 - a caller's error, logged by the call path
            return ops, calls.state.backoff_max
        finally:
            await pipe.reset()
        if read_replicas:
            self._replica_wait.read(slot, results.pop())
        lost = any(classify(r) is ErrorKind.NOSCRIPT for r in results if isinstance(r, Exception))
        reload_delay = 0.0
        if lost:
            logger.info(
                "Redis lost its scripts (a restart, a failover or SCRIPT FLUSH): loading them"
            )
            reload_delay = await load_by_sha(calls, self.scripts)
        failed_kinds, delay = self._refusals.failed_kinds(spans, results, calls.state)
        applied = {kind for kind, _ in groups} - failed_kinds
        if applied & CONFIRMED and not await self._replica_wait.confirmed(calls, slot):
            # Applied on the master, not (yet) on its replicas: all again.
            return ops, max(delay, calls.state.backoff)
        kept = [op for op in ops if op.kind in failed_kinds]
        if PRIOR not in failed_kinds:
            for kind, batch in groups:
                if kind == PRIOR:
                    self.priors_delivered(batch)
        if backlog and isinstance(results[-1], int):
            self.observe_backlog(slot, results[-1])
            self.backlog(self.items_backlog)
        if ITEM not in failed_kinds:
            self.pending_items -= sum(1 for op in ops if op.kind == ITEM)
        if ENQUEUE not in failed_kinds:
            for index, sent in enqueued:
                requests, added, rejected = enqueue_reply(sent, results[index], self._rejecting)
                self.enqueued(requests, added)
                for seed, reason in rejected:
                    self.seeds_rejected(seed, reason)
        if ACK not in failed_kinds and any(kind == ACK for kind, _ in groups):
            self.slots_freed()
        if lost and kept and again and not reload_delay:
            return await self._transaction(keys, calls, kept, again=False)
        return kept, max(delay, reload_delay)

    def observe_backlog(self, slot: str, length: int) -> None:
        """The item buffer of ``slot`` (a frontier prefix) holds ``length`` items now."""
        self._backlogs[slot] = length
        self.items_backlog = sum(self._backlogs.values())

    @property
    def replicas(self) -> int | None:
        """Connected replicas of the master of this spider's slot, as last read (None: not yet)."""
        return self._replica_wait.connected(self.keys.prefix)

    async def wait_flushed(self) -> None:
        """Return once everything buffered before this call has reached Redis."""
        target = self._appended
        while self._delivered < target:
            self._wake.set()
            await self._flushed.wait()

    async def close(self, timeout: float) -> bool:
        """Flush what is left, retrying until ``timeout``; True if nothing is left."""
        self._closing = True
        self._wake.set()
        if self._task is not None:
            await stop_tasks([self._task])
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self._ops and loop.time() < deadline:
            delay = await self.flush()
            if delay:
                await asyncio.sleep(min(delay, max(0.0, deadline - loop.time())))
        if self._ops:
            logger.error("%d writes could not reach Redis before shutdown", len(self._ops))
        return not self._ops
