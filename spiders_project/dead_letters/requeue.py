"""Putting dead letters back into the frontier (``scrapy deadletters requeue``), or
dropping them all (``purge``).

The oldest entries of ``<spider>:dead`` go back, a batch at a time, each
request in its host's queue of the lane it renders in, with a fresh count of
retries; garbage entries move to ``RedisKeys.dead_rejected``. On one Redis a
batch is one transaction (``requeue``); over a sharded frontier it cannot be,
and is enqueued first, removed after (``_requeue_sharded``). Both read and
sort a batch the same way (``_Batch``).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import redis

from spiders_project.crawl.hosts import host_of
from spiders_project.dead_letters.letters import DeadLetter
from spiders_project.frontier.calls import MAX_PRIORITY, enqueue_call, refuse_guard
from spiders_project.frontier.codec import serialize
from spiders_project.frontier.codec.serialize import InvalidEntry
from spiders_project.frontier.codec.values import ValueCodec
from spiders_project.frontier.scripts import lua_source
from spiders_project.keys import HTTP, RedisKeys

# Entries moved per MULTI/EXEC when requeueing, so one transaction stays small.
REQUEUE_BATCH = 500
# Transactions retried in a row when the dead list changed under our WATCH.
MAX_WATCH_RETRIES = 50

# What the enqueue script takes for one request: (host, fingerprint, priority, payload).
Entry = tuple[str, str, int, bytes]


def requeued_request(
    request: dict[str, Any], retry_priority_adjust: int, values: ValueCodec = serialize.PLAIN
) -> tuple[int, bytes, dict[str, Any]]:
    """(queue priority, frontier JSON, meta) of a dead request sent back for a fresh start.

    Its retry counter is removed, so it gets RETRY_TIMES retries again, and the
    priority RetryMiddleware took off on each retry is given back (otherwise
    every requeue would push it further down its host's queue).
    """
    d = serialize.loads(json.dumps(request), values)
    meta = dict(d.get("meta") or {})
    retries = meta.pop("retry_times", 0)
    adjust = meta.get("priority_adjust", retry_priority_adjust)
    priority = d.get("priority", 0)
    if isinstance(retries, int) and isinstance(adjust, int):
        priority -= retries * adjust
    priority = max(-MAX_PRIORITY, min(MAX_PRIORITY, priority))
    return priority, serialize.dumps({**d, "meta": meta, "priority": priority}, values), meta


@dataclass
class RequeueResult:
    requeued: int = 0
    rejected: int = 0


@dataclass
class _Batch:
    """One batch read from the tail of the dead list, sorted out."""

    raw: list[bytes]  # as LRANGE listed them: newest first
    # The requests to enqueue, by the keys of the queue each goes to (its
    # host's shard, its lane), oldest first.
    queues: dict[RedisKeys, list[Entry]] = field(default_factory=dict)
    rejected: list[tuple[bytes, str]] = field(default_factory=list)  # (garbage, why)

    @classmethod
    def sort(
        cls,
        raw: list[bytes],
        keys: RedisKeys,
        retry_priority_adjust: int,
        values: ValueCodec,
        group_of: Callable[[str], str],
        lane_of: Callable[[str, Mapping[str, Any]], str],
    ) -> _Batch:
        batch = cls(raw)
        # LRANGE lists newest first; enqueue oldest first to keep FIFO.
        # Identical entries are one failure written twice (a batch
        # resent after a lost reply): enqueue it once, remove them all.
        for entry in dict.fromkeys(reversed(raw)):
            try:
                letter = DeadLetter.loads(entry, values)
                priority, payload, meta = requeued_request(
                    letter.request, retry_priority_adjust, values
                )
            except InvalidEntry as exc:
                batch.rejected.append((entry, str(exc)))
                continue
            host = group_of(letter.url)
            queue = keys.for_host(host).in_lane(lane_of(letter.url, meta))
            batch.queues.setdefault(queue, []).append((host, "", priority, payload))
        return batch

    @property
    def requests(self) -> int:
        return sum(len(entries) for entries in self.queues.values())

    def remove(self, pipe: redis.client.Pipeline, keys: RedisKeys) -> None:
        """Queue on ``pipe`` the removal of every entry read, and the move of the garbage aside."""
        # Negative count: remove from the tail, where the entries read are.
        for entry, count in Counter(self.raw).items():
            pipe.lrem(keys.dead, -count, entry)  # type: ignore[arg-type]  # bytes are fine
        for entry, _ in self.rejected:
            pipe.lpush(keys.dead_rejected, entry)

    def done(self, result: RequeueResult, on_rejected: Callable[[bytes, str], None] | None) -> None:
        """Count the committed batch in ``result``, and tell ``on_rejected`` of its garbage."""
        result.requeued += self.requests
        result.rejected += len(self.rejected)
        if on_rejected is not None:
            for entry, reason in self.rejected:
                on_rejected(entry, reason)


def requeue(
    client: redis.Redis,
    keys: RedisKeys,
    limit: int,
    *,
    retry_priority_adjust: int,
    on_rejected: Callable[[bytes, str], None] | None = None,
    values: ValueCodec = serialize.PLAIN,
    group_of: Callable[[str], str] = host_of,
    lane_of: Callable[[str, Mapping[str, Any]], str] = lambda url, meta: HTTP,
) -> RequeueResult:
    """Move up to ``limit`` of the oldest dead letters back into the frontier.

    ``lane_of(url, meta)`` names the queue a request goes to (the render queue
    for one that renders: ``RenderRouting.lane_for``); by default all go to
    the HTTP queue.

    Each batch is one MULTI/EXEC: the enqueue script (EVAL, never EVALSHA: a
    NOSCRIPT inside MULTI would fail that command alone while the LREMs are
    applied), the LREM of exactly the entries read, and the move of garbage
    entries to ``RedisKeys.dead_rejected``. A crash therefore neither loses nor
    duplicates a request. The dead list is WATCHed between LRANGE and EXEC, so
    a concurrent requeue cannot enqueue the same entries twice; new dead
    letters LPUSHed meanwhile only make the batch start over.

    Requests are enqueued with fingerprint "" (never filtered): their
    fingerprints are already in the dupefilter. Byte-identical entries are
    requeued once. ``on_rejected(raw, reason)`` is called for each garbage
    entry once its move is committed.
    """

    def sort(raw: list[bytes]) -> _Batch:
        return _Batch.sort(raw, keys, retry_priority_adjust, values, group_of, lane_of)

    if keys.sharded:
        return _requeue_sharded(client, keys, limit, on_rejected, sort)
    result = RequeueResult()
    script = lua_source("enqueue")
    conflicts = 0
    taken = 0  # entries removed from the dead list
    while taken < limit:
        n = min(REQUEUE_BATCH, limit - taken)
        with client.pipeline(transaction=True) as pipe:
            try:
                pipe.watch(keys.dead)
                raw_entries: list[bytes] = pipe.lrange(keys.dead, -n, -1)  # type: ignore[assignment]  # bytes: no decode_responses
                if not raw_entries:
                    break
                batch = sort(raw_entries)
                pipe.multi()
                if batch.queues:
                    pipe.execute_command(*refuse_guard(keys))
                for queue, entries in batch.queues.items():
                    call_keys, call_args = enqueue_call(queue, entries)
                    pipe.eval(script, len(call_keys), *call_keys, *call_args)
                batch.remove(pipe, keys)
                results = pipe.execute(raise_on_error=False)
            except redis.WatchError:
                conflicts += 1
                if conflicts > MAX_WATCH_RETRIES:
                    raise
                continue
        conflicts = 0
        taken += len(raw_entries)
        # EXEC moved the garbage aside whatever the scripts did (a failed one raises below).
        batch.done(result, on_rejected)
        failed = [r for r in results[1 : 1 + len(batch.queues)] if isinstance(r, Exception)]
        if failed:
            # The script failed at run time (a key of the wrong type), and EXEC
            # applied the LREMs anyway: put the entries back at the tail, where
            # they were, before reporting the error. Lua does not roll back, so
            # requests enqueued before the failing one may be queued twice:
            # better than lost.
            garbage = {raw for raw, _ in batch.rejected}
            client.rpush(keys.dead, *(raw for raw in raw_entries if raw not in garbage))
            raise failed[0]
    return result


def _requeue_sharded(
    client: redis.Redis,
    keys: RedisKeys,
    limit: int,
    on_rejected: Callable[[bytes, str], None] | None,
    sort: Callable[[list[bytes]], _Batch],
) -> RequeueResult:
    """:func:`requeue` for a frontier sharded over a Redis Cluster.

    The dead list and the host queues are in different slots, so no
    transaction holds both: each batch is enqueued first (one script per
    shard), then removed from the dead list with the garbage moved aside (one
    transaction in the spider's slot). Killed between the two, the batch is
    requeued again by the next run: fetched twice at worst (a host's sorted
    set keeps one copy of a payload while it waits), never lost. Two requeues
    run at once may do the same.
    """
    result = RequeueResult()
    script = lua_source("enqueue")
    taken = 0
    while taken < limit:
        n = min(REQUEUE_BATCH, limit - taken)
        raw_entries: list[bytes] = client.lrange(keys.dead, -n, -1)  # type: ignore[assignment]
        if not raw_entries:
            break
        batch = sort(raw_entries)
        for queue, entries in batch.queues.items():
            call_keys, call_args = enqueue_call(queue, entries)
            client.eval(script, len(call_keys), *call_keys, *call_args)
        with client.pipeline(transaction=True) as pipe:
            batch.remove(pipe, keys)
            pipe.execute()
        taken += len(raw_entries)
        batch.done(result, on_rejected)
    return result


def purge(client: redis.Redis, keys: RedisKeys) -> int:
    """Delete every dead letter in one transaction; how many there were."""
    with client.pipeline(transaction=True) as pipe:
        pipe.llen(keys.dead)
        pipe.delete(keys.dead)
        total, _ = pipe.execute()
    return int(total)
