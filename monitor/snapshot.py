"""The crawl's state as Redis holds it, read in two pipelined round trips.

The first round trip reads every fixed key of every spider (queue lengths,
dupefilter, totals, db_writer counters, the heads of the item buffer, the list
of workers), Redis' clock and its memory; the second reads each listed
worker's hash and heartbeat. The cost does not depend on how many stats there
are, and nothing here writes. Both the exporter and ``scrapy crawlstatus``
show what this returns.

Both round trips go through the process' :class:`SyncRedisCalls` as reads
that are never retried: a reader shows "Redis down" now rather than wait
for it, and decides itself when to look again.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from spiders_project.extensions.heartbeat import ERRORS, ITEMS, PAGES, RESPONSES
from spiders_project.keys import RedisKeys
from spiders_project.redis_calls import SyncRedisCalls

# Labels of crawler_queue_length, in display order. "leases" are requests a
# worker is fetching; "rejected" is the sum of the four :rejected lists.
QUEUES = ("start_urls", "requests", "leases", "items", "items_processing", "dead", "rejected")
# Lists of entries set aside as unreadable, by what they were meant to be.
REJECTED = ("start_urls", "requests", "items", "dead")


@dataclass(frozen=True)
class WorkerView:
    """One listed worker: alive while its heartbeat key exists."""

    worker: str
    last_seen: float  # Unix time of its last publish, Redis clock
    alive: bool
    counters: dict[str, int]


@dataclass(frozen=True)
class SpiderView:
    """Everything about one spider's crawl."""

    spider: str
    queues: dict[str, int]
    rejected: dict[str, int]
    dupefilter: int
    totals: dict[str, int]  # all-time counters of every worker, see heartbeat.metric_counters
    db_writer: dict[str, float]  # items_written, rejected, batches, last_batch_at
    lag: float | None  # age (s) of the oldest buffered item, 0 when none; None if unreadable
    workers: list[WorkerView]
    samples: list[tuple[float, int]]  # (time, pages total), oldest first; only when asked for

    @property
    def workers_alive(self) -> int:
        return sum(1 for w in self.workers if w.alive)


@dataclass(frozen=True)
class ClusterView:
    """One read of Redis for a set of spiders."""

    time: float  # Redis' clock, Unix seconds
    used_memory: int
    maxmemory: int  # 0: no limit configured
    spiders: list[SpiderView]


def read_cluster(
    calls: SyncRedisCalls,
    spiders: Sequence[str],
    *,
    worker_retention: float,
    samples: bool = False,
) -> ClusterView:
    """Read the state of ``spiders`` (the caller decides what down means).

    Raises :class:`~spiders_project.redis_calls.RedisUnavailable` at once when
    Redis is unreachable, loading or busy (``calls.state`` logs the change),
    and the redis error of a reply that will not pass by itself, e.g. a key of
    the wrong type (``calls`` logs it with the command). Workers whose last
    publish is older than ``worker_retention`` seconds are left out (their
    entry is dropped by the next publish of any worker).
    """
    pipe = calls.client.pipeline(transaction=False)
    pipe.time()
    pipe.info("memory")
    for spider in spiders:
        k = RedisKeys(spider)
        pipe.llen(k.start_urls).get(k.requests_size).zcard(k.leases)
        pipe.llen(k.items).llen(k.items_processing).llen(k.dead)
        pipe.llen(k.start_urls_rejected).llen(k.requests_rejected)
        pipe.llen(k.items_rejected).llen(k.dead_rejected)
        pipe.scard(k.dupefilter).hgetall(k.stats_totals).hgetall(k.db_writer_stats)
        pipe.lindex(k.items_processing, 0).lindex(k.items, 0)
        pipe.zrange(k.workers, 0, -1, withscores=True)
        if samples:
            pipe.zrange(k.stats_samples, 0, -1)
    replies = calls.call("read_cluster", pipe.execute, retry=False, writes=False)
    seconds, micros = replies[0]
    now = seconds + micros / 1e6
    memory = replies[1]
    per_spider = 17 if samples else 16
    fields: dict[str, dict[str, Any]] = {}
    listed: dict[str, list[tuple[str, float]]] = {}
    for i, spider in enumerate(spiders):
        r = replies[2 + i * per_spider : 2 + (i + 1) * per_spider]
        rejected = dict(zip(REJECTED, r[6:10], strict=True))
        fields[spider] = {
            "queues": {
                "start_urls": r[0],
                "requests": int(r[1] or 0),
                "leases": r[2],
                "items": r[3],
                "items_processing": r[4],
                "dead": r[5],
                "rejected": sum(rejected.values()),
            },
            "rejected": rejected,
            "dupefilter": r[10],
            "totals": counters_of(r[11]),
            "db_writer": _numbers(r[12]),
            "lag": _lag(now, r[13], r[14]),
            "samples": _samples(r[16]) if samples else [],
        }
        oldest = now - worker_retention
        listed[spider] = [(m.decode(), score) for m, score in r[15] if score >= oldest]
    workers = _read_workers(calls, listed)
    return ClusterView(
        time=now,
        used_memory=int(memory.get("used_memory", 0)),
        maxmemory=int(memory.get("maxmemory", 0)),
        spiders=[
            SpiderView(spider=spider, workers=workers[spider], **fields[spider])
            for spider in spiders
        ],
    )


def _read_workers(
    calls: SyncRedisCalls, listed: dict[str, list[tuple[str, float]]]
) -> dict[str, list[WorkerView]]:
    """Second round trip: the hash and heartbeat of every listed worker."""
    found: dict[str, list[WorkerView]] = {spider: [] for spider in listed}
    if not any(listed.values()):
        return found
    pipe = calls.client.pipeline(transaction=False)
    for spider, workers in listed.items():
        k = RedisKeys(spider)
        for worker, _ in workers:
            pipe.hgetall(k.worker_stats(worker)).exists(k.worker_heartbeat(worker))
    replies = iter(calls.call("read_cluster workers", pipe.execute, retry=False, writes=False))
    for spider, workers in listed.items():
        for worker, last_seen in workers:
            stats, alive = next(replies), next(replies)
            found[spider].append(WorkerView(worker, last_seen, bool(alive), counters_of(stats)))
    return found


def counters_of(fields: Mapping[bytes, bytes]) -> dict[str, int]:
    """The metric counters among a hash's fields (pages, items, errors:*, responses:*)."""
    counters = {}
    for raw_name, raw_value in fields.items():
        name = raw_name.decode()
        if name in (PAGES, ITEMS) or name.startswith((ERRORS, RESPONSES)):
            try:
                counters[name] = int(raw_value)
            except ValueError:
                continue
    return counters


def _numbers(fields: Mapping[bytes, bytes]) -> dict[str, float]:
    numbers = {}
    for name, value in fields.items():
        try:
            numbers[name.decode()] = float(value)
        except ValueError:
            continue
    return numbers


def _lag(now: float, processing_head: bytes | None, buffer_head: bytes | None) -> float | None:
    """Age of the oldest item not yet in the database: the db_writer's batch in hand first."""
    head = processing_head if processing_head is not None else buffer_head
    if head is None:
        return 0.0
    try:
        fetched_at = json.loads(head)["fetched_at"]
        return max(0.0, now - datetime.fromisoformat(fetched_at).timestamp())
    except (ValueError, KeyError, TypeError):
        return None


def _samples(members: list[bytes]) -> list[tuple[float, int]]:
    samples = []
    for member in members:
        try:
            at, pages = member.split()
            samples.append((float(at), int(pages)))
        except ValueError:
            continue
    return samples


def pages_per_second(view: SpiderView, now: float, window: float) -> tuple[float, float] | None:
    """(pages/s, seconds it was measured over) for the last ``window`` seconds, or None.

    From the samples the publishers leave: the growth of the pages total since
    the last sample at or before ``now - window`` (or since the first sample,
    over a shorter span, when the samples are younger than that), over the time
    from that sample to ``now``; so a crawl whose workers stopped decays to 0.
    """
    if not view.samples:
        return None
    before = [s for s in view.samples if s[0] <= now - window]
    base_time, base_pages = before[-1] if before else view.samples[0]
    span = now - base_time
    if span < 1.0:
        return None
    return max(0, view.totals.get(PAGES, 0) - base_pages) / span, min(span, window)


def eta_seconds(view: SpiderView, rate: float | None) -> float | None:
    """Seconds to fetch the requests queued and leased now, at ``rate`` pages/s."""
    work = view.queues["requests"] + view.queues["leases"]
    if work == 0:
        return 0.0
    if not rate:
        return None
    return work / rate


def as_dict(view: ClusterView) -> dict[str, Any]:
    """The view as plain JSON-able data (``scrapy crawlstatus --json``)."""
    return {
        "time": view.time,
        "redis": {"used_memory": view.used_memory, "maxmemory": view.maxmemory},
        "spiders": [
            {
                "spider": s.spider,
                "queues": s.queues,
                "rejected": s.rejected,
                "dupefilter": s.dupefilter,
                "totals": s.totals,
                "db_writer": s.db_writer,
                "lag": s.lag,
                "workers_alive": s.workers_alive,
                "workers": [
                    {
                        "worker": w.worker,
                        "alive": w.alive,
                        "last_seen": w.last_seen,
                        "counters": w.counters,
                    }
                    for w in s.workers
                ],
            }
            for s in view.spiders
        ],
    }
