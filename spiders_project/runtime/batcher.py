"""Write-behind to Redis: every write of a worker, in order, one round trip a tick.

New requests, items, acknowledgements and rejects are appended in memory by
the scheduler and the item pipeline (which never wait for Redis) and sent
together in one MULTI/EXEC every ``FRONTIER_FLUSH_INTERVAL`` (or at once, for
the release of a slot of a host at its cap: see ``release``). Because one
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
(or all connected ones, if fewer: the transaction's ``INFO replication``
tells, every ``REPLICAS_EVERY`` seconds). Otherwise its ops are sent again,
by the same at-least-once rule: a failover to a replica that lacks them then
loses nothing a worker counted done.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from spiders_project.keys import HTTP, LANES, RedisKeys
from spiders_project.redis_calls import (
    ErrorKind,
    LuaScript,
    RedisCalls,
    RedisState,
    RedisUnavailable,
    classify,
)
from spiders_project.runtime.calls import ack_call, enqueue_call, refuse_guard, seed_digest
from spiders_project.runtime.clock import ScriptClock
from spiders_project.runtime.scripts import FrontierScripts
from spiders_project.runtime.tasks import spawn_loop, stop_tasks, wait_event
from spiders_project.wiring import Subscribers

logger = logging.getLogger(__name__)

# Op kinds; a tick sends one group of commands per kind.
_ENQUEUE, _ITEM, _ACK, _PUSH, _COMMAND = "enqueue", "item", "ack", "push", "command"
# The kinds whose writes replicas must confirm (WAIT) when asked to.
_CONFIRMED = {_ENQUEUE, _ITEM, _ACK}
# Seconds between two reads of the master's connected replicas.
REPLICAS_EVERY = 5.0


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
        self._ops: list[tuple[str, Any]] = []
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
        self._reject_reasons: dict[bytes, str] = {}
        # Called at the start of every flush, to add writes that are due (acks).
        self.before_flush: Subscribers[[]] = Subscribers()
        self.pending_items = 0
        # Ops ever appended / ever delivered, and an event set after each
        # delivery, for wait_flushed().
        self._appended = 0
        self._delivered = 0
        self._flushed = asyncio.Event()
        # Length of the shared item buffer as of the last flush.
        self.items_backlog = 0
        # Told that length after each flush (backpressure reacts at once).
        self.backlog: Subscribers[[int]] = Subscribers()
        # The command Redis refused last (a caller's error), logged once until it passes.
        self._refusal: str | None = None
        # Replicas that must confirm writes (0: none), and what the master last
        # said of its connected replicas (None: not asked yet).
        self.wait_replicas = wait_replicas
        self.wait_timeout_ms = max(1, round(wait_timeout * 1000))
        # By slot (frontier prefix): (connected replicas as last read, when).
        self._replicas: dict[str, tuple[int | None, float]] = {}
        self._unconfirmed = False

    # --- appending (never waits) ---------------------------------------------
    def _add(self, op: tuple[str, Any]) -> None:
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
        self._add((_ENQUEUE, (host, fingerprint, priority, payload, seed, wait_ms, lane)))

    def reject_seed(self, seed: bytes, reason: str) -> None:
        """Move a start_urls entry that is not a valid seed to start_urls:rejected.

        ``seeds_rejected`` hears of it once the move happened, if this worker
        was the one that made it.
        """
        self._reject_reasons[seed] = reason
        self._add((_ENQUEUE, ("", "", 0, b"", seed, 0, HTTP)))

    def item(self, payload: bytes) -> None:
        self._add((_ITEM, payload))
        self.pending_items += 1

    def ack(self, lease_id: bytes | str) -> None:
        """End a lease of this worker for good (``lua/ack.lua``)."""
        self._add((_ACK, (lease_id, False)))

    def release(self, lease_id: bytes | str, *, now: bool = False) -> None:
        """Give back the cap slot of a lease whose download ended; the lease
        stays until ``ack`` (``lua/ack.lua``).

        ``now``: its host is at its cap, so other requests of it wait for this
        slot: flush at once instead of at the next tick (one round trip, not
        up to ``FRONTIER_FLUSH_INTERVAL``). Only such releases wake the
        batcher, so an uncapped crawl keeps its batches whole.
        """
        self._add((_ACK, (lease_id, True)))
        if now:
            self._wake.set()

    def push(self, key: str, value: bytes) -> None:
        """LPUSH ``value`` onto ``key`` (rejects, dead letters)."""
        self._add((_PUSH, (key, value)))

    def command(self, *args: Any) -> None:
        """Any other Redis command, sent in order with the rest."""
        self._add((_COMMAND, args))

    def script(self, script: LuaScript, keys: list[str], args: list[Any]) -> None:
        """A Lua script (EVAL by source: see ``flush``), sent in order with the rest."""
        self._add((_COMMAND, ("EVAL", script.source, len(keys), *keys, *args)))

    def __len__(self) -> int:
        return len(self._ops)

    def has_pending_requests(self) -> bool:
        return any(kind == _ENQUEUE for kind, _ in self._ops)

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

    def _delivered_all(self, ops: list[tuple[str, Any]], kept: list[tuple[str, Any]]) -> None:
        """Put ``kept`` back in front; count the rest of ``ops`` as delivered."""
        self._ops = kept + self._ops
        self._delivered += len(ops) - len(kept)
        flushed, self._flushed = self._flushed, asyncio.Event()
        flushed.set()

    async def _flush_sharded(self, ops: list[tuple[str, Any]]) -> float:
        """One tick over a sharded frontier (shards.py): one MULTI/EXEC per slot.

        Redis Cluster has no transaction across slots, so the tick has two
        steps: first every write but the acks (each shard's new requests,
        the items, rejects, dead letters), one transaction per slot sent
        together; then, only once all of those are in, the acks, and the
        claims of the seeds whose requests went in. A page's ack therefore
        still never lands before its items and links; a worker killed between
        the steps leaves its leases to expire and be fetched again, which
        the upserting db_writer and the seen-set absorb. A seed is claimed
        (removed from start_urls) after its request is queued, not in the same
        script; the shard remembers the seed for ``calls.SEED_TAKEN_MS``
        (``keys.seeds_taken``), so a worker that reads it again in between (two
        workers polling together, or one killed between the steps) claims it
        without queuing it twice. Unlike on one Redis, an identical entry
        pushed again within that window is claimed without a second crawl.
        """
        first = [op for op in ops if op[0] != _ACK]
        second = [op for op in ops if op[0] == _ACK]
        kept, delay, claims = await self._send_groups(first)
        self._appended += len(claims)
        second += claims
        if kept:
            self._delivered_all(ops + claims, kept + second)
            return delay
        kept, delay2, _ = await self._send_groups(second)
        self._delivered_all(ops + claims, kept)
        return max(delay, delay2)

    async def _send_groups(
        self, ops: list[tuple[str, Any]]
    ) -> tuple[list[tuple[str, Any]], float, list[tuple[str, Any]]]:
        """``ops`` in one transaction per slot, all at once: (ops kept, backoff,
        seed claims due now that their requests are queued)."""
        groups: dict[str, tuple[RedisKeys, list[tuple[str, Any]]]] = {}
        # A seed's request goes to its host's shard with the entry's digest
        # (that script cannot reach start_urls), and is claimed after: see above.
        seeds: dict[int, tuple[str, Any]] = {}  # id of the op sent -> the op as given
        for op in ops:
            keys = self._keys_of(op)
            if op[0] == _ENQUEUE and op[1][0] and op[1][4]:
                host, fingerprint, priority, payload, _, wait_ms, lane = op[1]
                digest = seed_digest(op[1][4])
                sent = (_ENQUEUE, (host, fingerprint, priority, payload, digest, wait_ms, lane))
                seeds[id(sent)] = op
                op = sent
            groups.setdefault(keys.frontier_prefix, (keys, []))[1].append(op)
        if not groups:
            return [], 0.0, []
        replies = await asyncio.gather(
            *(
                self._transaction(keys, self.calls_for(keys), group)
                for keys, group in groups.values()
            )
        )
        kept = [op for group_kept, _ in replies for op in group_kept]
        delay = max(delay for _, delay in replies)
        kept_ids = {id(op) for op in kept}
        claims = [
            (_COMMAND, ("LREM", self.keys.start_urls, 1, given[1][4]))
            for sent_id, given in seeds.items()
            if sent_id not in kept_ids
        ]
        # A kept seed's request goes again as given, entry and all.
        return [seeds.get(id(op), op) for op in kept], delay, claims

    def _keys_of(self, op: tuple[str, Any]) -> RedisKeys:
        """The keys of the slot ``op`` writes to (sharded frontier only)."""
        kind, arg = op
        if kind == _ENQUEUE:
            return self.keys.for_host(arg[0]) if arg[0] else self.keys
        if kind == _ACK:
            return self.keys.of_shard(lease_part(arg[0])[0])
        if kind == _PUSH:
            return self._by_prefix(arg[0])
        if kind == _COMMAND:
            # EVAL source numkeys key...; any other command names its key first.
            return self._by_prefix(str(arg[3] if arg[0] == "EVAL" else arg[1]))
        return self.keys

    def _by_prefix(self, key: str) -> RedisKeys:
        for keys in self.keys.all_shards:
            if key.startswith(keys.frontier_prefix):
                return keys
        return self.keys

    async def _transaction(
        self, keys: RedisKeys, calls: RedisCalls, ops: list[tuple[str, Any]]
    ) -> tuple[list[tuple[str, Any]], float]:
        """``ops`` in one MULTI/EXEC on ``calls``: (the ops Redis did not take, backoff)."""
        groups = _group(ops)
        home = keys.frontier_prefix == self.keys.prefix
        client = calls.client
        pipe = client.pipeline(transaction=True)
        spans: list[tuple[str, int, int, str]] = []  # (kind, first, end, command name)
        n_commands = 0
        if any(kind == _ENQUEUE for kind, _ in groups) and not any(
            kind in (_ITEM, _PUSH) for kind, _ in groups
        ):
            # RPUSH and LPUSH already make Redis refuse the transaction whole under OOM.
            pipe.execute_command(*refuse_guard(keys))
            n_commands += 1
        enqueued: list[tuple[int, list[Any]]] = []  # (command index, its requests)
        for kind, batch in groups:
            first = n_commands
            if kind == _ENQUEUE:
                # One script per lane (its own queues and ready-set; the
                # seen-set is the same), all in this one transaction.
                for lane, entries in _by_lane(batch, lambda entry: entry[6]):
                    enqueue_keys, args = enqueue_call(
                        keys.in_lane(lane), entries, seen=self.seen, now=self.clock.arg()
                    )
                    # EVAL, not EVALSHA: inside MULTI a NOSCRIPT error (Redis
                    # restarted, script cache empty) would fail this command alone
                    # while the rest of the transaction is applied.
                    pipe.eval(self.scripts.enqueue.source, len(enqueue_keys), *enqueue_keys, *args)
                    enqueued.append((n_commands, entries))
                    n_commands += 1
                name = "script enqueue"
            elif kind == _ITEM:
                pipe.rpush(keys.items, *batch)
                n_commands += 1
                name = "RPUSH items"
            elif kind == _ACK:
                for lane, acks in _by_lane(batch, lambda ack: lease_part(ack[0])[1]):
                    ack_keys, args = ack_call(
                        keys.in_lane(lane),
                        [lease_id for lease_id, release in acks if not release],
                        releases=[lease_id for lease_id, release in acks if release],
                        now=self.clock.arg(),
                    )
                    pipe.eval(self.scripts.ack.source, len(ack_keys), *ack_keys, *args)
                    n_commands += 1
                name = "script ack"
            elif kind == _PUSH:
                for key, value in batch:
                    pipe.lpush(key, value)
                    n_commands += 1
                name = "LPUSH"
            else:
                for args in batch:
                    pipe.execute_command(*args)
                    n_commands += 1
                name = str(batch[0][0])
            spans.append((kind, first, n_commands, name))
        if home:
            # Free ride: the item backlog, for backpressure.
            pipe.llen(self.keys.items)
        replicas, read_at = self._replicas.get(keys.frontier_prefix, (None, 0.0))
        read_replicas = bool(self.wait_replicas) and (time.monotonic() - read_at >= REPLICAS_EVERY)
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
            info = results.pop()
            if isinstance(info, dict):
                replicas = int(info.get("connected_slaves", 0))
                self._replicas[keys.frontier_prefix] = (replicas, time.monotonic())
        failed_kinds, delay = self._failed_groups(spans, results, calls.state)
        applied = {kind for kind, _ in groups} - failed_kinds
        if not await self._confirmed(calls, keys.frontier_prefix, replicas, applied):
            # Applied on the master, not (yet) on its replicas: all again.
            return ops, max(delay, calls.state.backoff)
        kept = [op for op in ops if op[0] in failed_kinds]
        if home and isinstance(results[-1], int):
            self.items_backlog = results[-1]
            self.backlog(self.items_backlog)
        if _ITEM not in failed_kinds:
            self.pending_items -= sum(1 for kind, _ in ops if kind == _ITEM)
        if _ENQUEUE not in failed_kinds:
            for index, entries in enqueued:
                self._report_enqueued(entries, results[index])
        if _ACK not in failed_kinds and any(kind == _ACK for kind, _ in groups):
            self.slots_freed()
        return kept, delay

    @property
    def replicas(self) -> int | None:
        """Connected replicas of the master of this spider's slot, as last read (None: not yet)."""
        return self._replicas.get(self.keys.prefix, (None, 0.0))[0]

    async def _confirmed(
        self, calls: RedisCalls, slot: str, replicas: int | None, applied: set[str]
    ) -> bool:
        """Whether the replicas asked for have what this tick applied (WAIT).

        True without a round trip when nothing applied needs it, when no
        replica is asked for, or none is connected. A WAIT that fails (Redis
        away) counts as not confirmed: the ops go again.
        """
        wanted = min(self.wait_replicas, replicas or 0)
        if not wanted or not applied & _CONFIRMED:
            return True
        try:
            acked = await calls.command(
                "WAIT", wanted, self.wait_timeout_ms, retry=False, writes=False
            )
        except Exception:  # noqa: BLE001 - away or refused: logged by the call path
            return False
        ok = int(acked) >= wanted
        if not ok:
            # A failover may have left fewer: ask again next tick.
            self._replicas[slot] = (replicas, 0.0)
        if ok == self._unconfirmed:  # a change of state: one line each way
            if ok:
                logger.info("Writes are confirmed by %d replica(s) again", wanted)
            else:
                logger.warning(
                    "Writes not confirmed by %d replica(s) within %d ms (%d did): "
                    "sending them again until they are",
                    wanted,
                    self.wait_timeout_ms,
                    int(acked),
                )
            self._unconfirmed = not ok
        return ok

    def _report_enqueued(self, sent: list[Any], reply: Any) -> None:
        """Tell subscribers what one enqueue script's ``{enqueued, rejected seed...}``
        says of the requests it was ``sent``."""
        requests = sum(1 for host, *_ in sent if host)
        self.enqueued(requests, int(reply[0]))
        moved = set(reply[1:])
        for host, _, _, _, seed, *_ in sent:
            if host or seed not in self._reject_reasons:
                continue
            reason = self._reject_reasons.pop(seed)
            if seed in moved:
                moved.discard(seed)
                self.seeds_rejected(seed, reason)

    def _failed_groups(
        self, spans: list[tuple[str, int, int, str]], results: list[Any], state: RedisState
    ) -> tuple[set[str], float]:
        """The op kinds whose commands Redis refused inside EXEC, and the wait before resending.

        Logs a refused command once (until it passes); refused writes (OOM,
        READONLY) go through the shared state, which logs them once too.
        """
        failed: set[str] = set()
        delay = 0.0
        refusal: str | None = None
        for kind, first, end, name in spans:
            errors = [r for r in results[first:end] if isinstance(r, Exception)]
            if not errors:
                continue
            failed.add(kind)
            exc = errors[0]
            if classify(exc) in (ErrorKind.REFUSED_WRITES, ErrorKind.CONNECTION):
                delay = max(delay, state.failed(exc))
                continue
            refusal = f"{name}: {type(exc).__name__}: {exc}"
            if refusal != self._refusal:
                logger.error("Redis refused %s; keeping those writes and retrying", refusal)
            delay = max(delay, state.backoff_max)
        if self._refusal is not None and refusal is None:
            logger.info("Redis took the writes it had refused (%s)", self._refusal)
        self._refusal = refusal
        if not delay:
            # Acks alone (ack.lua) are taken even out of memory: only a
            # tick that wrote something proves Redis accepts writes again.
            if any(kind != _ACK for kind, _, _, _ in spans):
                state.writes_ok()
            else:
                state.ok()
        return failed, delay

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


def lease_part(lease_id: bytes | str) -> tuple[int, str]:
    """The (shard, lane) whose queue gave a lease id: lua/lease.lua names ids
    ``<owner>/<n>``; a sharded frontier's owner carries ``@<shard>``, and the
    render queue's ``+render`` after it (``WorkerRedis.lease_owner_of``)."""
    text = lease_id.decode() if isinstance(lease_id, bytes) else lease_id
    owner = text.rpartition("/")[0]
    head, plus, lane = owner.rpartition("+")
    if plus and lane in LANES:
        owner = head
    else:
        lane = HTTP
    _, at, shard = owner.rpartition("@")
    return (int(shard) if at and shard.isdigit() else 0), lane


def _by_lane(batch: list[Any], lane_of: Callable[[Any], str]) -> list[tuple[str, list[Any]]]:
    """``batch`` split by lane, in order within each; lanes in the order of ``LANES``."""
    lanes: dict[str, list[Any]] = {}
    for entry in batch:
        lanes.setdefault(lane_of(entry), []).append(entry)
    order = [lane for lane in LANES if lane in lanes]
    return [(lane, lanes[lane]) for lane in order + [lane for lane in lanes if lane not in LANES]]


def _group(ops: list[tuple[str, Any]]) -> list[tuple[str, list[Any]]]:
    """The ops of each kind, in their order, kinds in order of first appearance.

    One group per kind, not per run of consecutive ops: a page's item, links
    and ack interleave with the next page's, so runs are a page long, and a
    tick would otherwise send one enqueue script, one RPUSH, one ZREM and one
    HDEL per page (one each: 17.6 -> 12.8 Redis commands per page in the benchmark).
    Regrouping is safe because the whole tick is one MULTI/EXEC: Redis applies
    it at once or not at all, so a page's ack never lands without its items.
    """
    groups: dict[str, list[Any]] = {}
    for kind, arg in ops:
        groups.setdefault(kind, []).append(arg)
    return list(groups.items())
