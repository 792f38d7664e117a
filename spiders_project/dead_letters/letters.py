"""Dead letters: requests that failed for good, kept in ``<spider>:dead``.

A worker's :class:`~spiders_project.dead_letters.middleware.DeadLetterMiddleware`
LPUSHes one JSON entry per request on which RetryMiddleware gave up::

    {"request": {...}, "url": "...", "error": "HTTP 503", "attempts": 3,
     "failed_at": "2025-01-01T00:00:00.000+00:00", "worker": "host:1234"}

``request`` is the frontier's own JSON (:func:`serialize.dumps`), embedded as an
object, so putting a dead letter back is a plain enqueue. This module is the
one place that writes, reads and requeues entries; ``scrapy deadletters`` and
the middleware share it.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import redis

from spiders_project.hosts import host_of
from spiders_project.keys import HTTP, RedisKeys
from spiders_project.runtime import serialize
from spiders_project.runtime.calls import MAX_PRIORITY, enqueue_call, refuse_guard
from spiders_project.runtime.scripts import lua_source
from spiders_project.runtime.serialize import InvalidEntry
from spiders_project.runtime.values import ValueCodec

# Entries moved per MULTI/EXEC when requeueing, so one transaction stays small.
REQUEUE_BATCH = 500
# Transactions retried in a row when the dead list changed under our WATCH.
MAX_WATCH_RETRIES = 50


@dataclass(frozen=True)
class DeadLetter:
    """One entry of the dead list."""

    request: dict[str, Any]  # the request as serialize.dumps wrote it, decoded
    url: str
    error: str
    attempts: int
    failed_at: str  # ISO 8601, UTC
    worker: str  # "host:pid"

    def dumps(self) -> bytes:
        entry = {
            "request": self.request,
            "url": self.url,
            "error": self.error,
            "attempts": self.attempts,
            "failed_at": self.failed_at,
            "worker": self.worker,
        }
        return json.dumps(entry, separators=(",", ":"), ensure_ascii=False).encode()

    @classmethod
    def loads(cls, raw: bytes | str, values: ValueCodec = serialize.PLAIN) -> DeadLetter:
        """The dead letter in ``raw``; raises InvalidEntry if it is not one we wrote.

        ``values`` is the project's codec: item classes in the request's meta
        are checked against its allow-list.
        """
        try:
            obj = json.loads(raw)
        except (UnicodeDecodeError, ValueError) as exc:
            raise InvalidEntry(f"not JSON: {exc}") from None
        if not isinstance(obj, dict):
            raise InvalidEntry("not a JSON object")
        request = obj.get("request")
        if not isinstance(request, dict):
            raise InvalidEntry("no request object")
        serialize.loads(json.dumps(request), values)  # raises InvalidEntry
        for name in ("url", "error", "failed_at", "worker"):
            if not isinstance(obj.get(name), str):
                raise InvalidEntry(f"bad {name}")
        attempts = obj.get("attempts")
        if not isinstance(attempts, int) or isinstance(attempts, bool) or attempts < 1:
            raise InvalidEntry("bad attempts")
        return cls(request, obj["url"], obj["error"], attempts, obj["failed_at"], obj["worker"])


def make_dead_letter(
    payload: bytes, *, error: str, attempts: int, failed_at: datetime, worker: str
) -> DeadLetter:
    """The dead letter of a request whose frontier JSON is ``payload``."""
    request = json.loads(payload)
    return DeadLetter(
        request=request,
        url=serialize.url_of(request),
        error=error,
        attempts=attempts,
        failed_at=failed_at.isoformat(timespec="milliseconds"),
        worker=worker,
    )


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
    result = RequeueResult()
    script = lua_source("enqueue")
    if keys.sharded:
        return _requeue_sharded(
            client, keys, limit, retry_priority_adjust, on_rejected, values, group_of, lane_of
        )
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
                lanes: dict[str, list[tuple[str, str, int, bytes]]] = {}
                rejected: list[tuple[bytes, str]] = []
                # LRANGE lists newest first; enqueue oldest first to keep FIFO.
                # Identical entries are one failure written twice (a batch
                # resent after a lost reply): enqueue it once, remove them all.
                for raw in dict.fromkeys(reversed(raw_entries)):
                    try:
                        letter = DeadLetter.loads(raw, values)
                        priority, payload, meta = requeued_request(
                            letter.request, retry_priority_adjust, values
                        )
                    except InvalidEntry as exc:
                        rejected.append((raw, str(exc)))
                        continue
                    lane = lane_of(letter.url, meta)
                    lanes.setdefault(lane, []).append((group_of(letter.url), "", priority, payload))
                entries = [entry for batch in lanes.values() for entry in batch]
                pipe.multi()
                if entries:
                    pipe.execute_command(*refuse_guard(keys))
                for lane, batch in lanes.items():
                    call_keys, call_args = enqueue_call(keys.in_lane(lane), batch)
                    pipe.eval(script, len(call_keys), *call_keys, *call_args)
                # Negative count: remove from the tail, where the entries read are.
                for raw, count in Counter(raw_entries).items():
                    pipe.lrem(keys.dead, -count, raw)  # type: ignore[arg-type]  # bytes are fine
                for raw, _ in rejected:
                    pipe.lpush(keys.dead_rejected, raw)
                results = pipe.execute(raise_on_error=False)
            except redis.WatchError:
                conflicts += 1
                if conflicts > MAX_WATCH_RETRIES:
                    raise
                continue
        conflicts = 0
        taken += len(raw_entries)
        result.rejected += len(rejected)
        if on_rejected is not None:
            for raw, reason in rejected:
                on_rejected(raw, reason)
        failed = [r for r in results[1 : 1 + len(lanes)] if isinstance(r, Exception)]
        if entries and failed:
            # The script failed at run time (a key of the wrong type), and EXEC
            # applied the LREMs anyway: put the entries back at the tail, where
            # they were, before reporting the error. Lua does not roll back, so
            # requests enqueued before the failing one may be queued twice:
            # better than lost.
            garbage = {raw for raw, _ in rejected}
            client.rpush(keys.dead, *(raw for raw in raw_entries if raw not in garbage))
            raise failed[0]
        result.requeued += len(entries)
    return result


def _requeue_sharded(
    client: redis.Redis,
    keys: RedisKeys,
    limit: int,
    retry_priority_adjust: int,
    on_rejected: Callable[[bytes, str], None] | None,
    values: ValueCodec,
    group_of: Callable[[str], str],
    lane_of: Callable[[str, Mapping[str, Any]], str],
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
        by_queue: dict[tuple[int, str], list[tuple[str, str, int, bytes]]] = {}
        rejected: list[tuple[bytes, str]] = []
        requeued = 0
        for raw in dict.fromkeys(reversed(raw_entries)):
            try:
                letter = DeadLetter.loads(raw, values)
                priority, payload, meta = requeued_request(
                    letter.request, retry_priority_adjust, values
                )
            except InvalidEntry as exc:
                rejected.append((raw, str(exc)))
                continue
            host = group_of(letter.url)
            queue = (keys.shard_of(host), lane_of(letter.url, meta))
            by_queue.setdefault(queue, []).append((host, "", priority, payload))
            requeued += 1
        for (shard, lane), entries in by_queue.items():
            call_keys, call_args = enqueue_call(keys.of_shard(shard).in_lane(lane), entries)
            client.eval(script, len(call_keys), *call_keys, *call_args)
        with client.pipeline(transaction=True) as pipe:
            for raw, count in Counter(raw_entries).items():
                pipe.lrem(keys.dead, -count, raw)  # type: ignore[arg-type]  # bytes are fine
            for raw, _ in rejected:
                pipe.lpush(keys.dead_rejected, raw)
            pipe.execute()
        taken += len(raw_entries)
        result.rejected += len(rejected)
        result.requeued += requeued
        if on_rejected is not None:
            for raw, reason in rejected:
                on_rejected(raw, reason)
    return result
