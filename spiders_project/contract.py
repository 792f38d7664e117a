"""What workers leave in Redis and how anyone reads it back: the one contract.

Workers publish their stats and heartbeats (``extensions/heartbeat.py``), and
the frontier, the item buffer and the db_writer keep their state under
``keys.py``'s names. The exporter (``monitor``), ``scrapy crawlstatus``, the
demo and the spider's own idle check all read that state here, so a field
renamed or a queue added changes one module, and "is the cluster idle?" has
one answer (:attr:`Work.idle`).

Standard library only, on purpose: the monitor imports this module without
importing Scrapy, Twisted or the worker. Nothing here talks to Redis either.
A reader sends the commands this module lists through its own call path
(sync or asyncio, ``redis_calls``' ``pipelined``) and hands the replies back
to be read; :func:`read_cluster` takes that sender as an argument.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from spiders_project.keys import HTTP, RENDER, RedisKeys

# --- Fields of a worker's stats hash and of the spider's totals ---------------
# Metric counters: the exporter reads these (and only these) for the
# crawler_*_total metrics; heartbeat.metric_counters() derives them.
PAGES = "pages"  # responses that reached the spider (Scrapy's response_received_count)
ITEMS = "items"  # items scraped (item_scraped_count)
ERRORS = "errors:"  # errors:<kind>
RESPONSES = "responses:"  # responses:<HTTP status>, every response the downloader got
PROXY_REQUESTS = "proxy_requests:"  # proxy_requests:<proxy name>, requests sent through it
PROXY_BANS = "proxy_bans:"  # proxy_bans:<proxy name>, bans this worker gave it
# Fields the publish script adds to the worker hash.
STATE_FIELD = "_state"  # RUNNING, or CLOSED after its last publish
LAST_SEEN_FIELD = "_last_seen"  # Unix time of the last publish, Redis clock
RUNNING, CLOSED = "running", "closed"

# Labels of crawler_queue_length, in display order. "requests" are all queued
# requests, "render" those of them in the render queue (waiting for a worker
# that renders: WORKER_ROLE all or render); "leases" are requests a worker is
# fetching; "rejected" is the sum of the four :rejected lists; "unserializable"
# holds requests a spider made that the frontier cannot store.
QUEUES = (
    "start_urls",
    "requests",
    "render",
    "leases",
    "items",
    "items_processing",
    "dead",
    "rejected",
    "unserializable",
)
# Lists of entries set aside as unreadable, by what they were meant to be.
REJECTED = ("start_urls", "requests", "items", "dead")

Command = tuple[Any, ...]  # the arguments of one Redis command, as execute_command takes them
# Sends a named batch of commands in one round trip and returns their replies.
Send = Callable[[str, list[Command]], list[Any]]


# --- Unfinished work, and the one idle rule -----------------------------------
@dataclass(frozen=True)
class Work:
    """Everything in Redis that is not finished yet, for one spider."""

    seeds: int  # start_urls entries not yet claimed
    queued: int  # requests in the host queues (requests:size)
    leased: int  # requests a worker is fetching
    items: int  # items buffered for the db_writer
    processing: int  # items the db_writer holds in its batch

    @property
    def idle(self) -> bool:
        """No seed, no queued request and no lease anywhere: no worker can get work.

        The item buffer does not count: workers may close while the db_writer
        still drains it. A worker adds its own engine (nothing downloading or
        scraping) before it calls the cluster idle.
        """
        return not (self.seeds or self.queued or self.leased)

    @property
    def drained(self) -> bool:
        """Idle, and every item is in the database: the crawl is over."""
        return self.idle and not (self.items or self.processing)


def work_reads(keys: RedisKeys) -> list[Command]:
    """The commands whose replies :func:`work_of` reads (one round trip)."""
    first = keys.in_lane(HTTP).all_shards[0]
    return [
        ("LLEN", keys.start_urls),
        ("GET", first.requests_size),
        ("ZCARD", first.leases),
        ("LLEN", keys.items),
        ("LLEN", keys.items_processing),
        *_queues_work(keys),
    ]


def _more_queues(keys: RedisKeys) -> list[RedisKeys]:
    """Every queue of the frontier but the first shard's HTTP queue: the other
    shards' (a sharded frontier), then each shard's render queue."""
    shards = keys.in_lane(HTTP).all_shards
    return shards[1:] + [shard.in_lane(RENDER) for shard in shards]


def _queues_work(keys: RedisKeys) -> list[Command]:
    """The queued and leased requests of each of ``_more_queues``."""
    reads: list[Command] = []
    for queue in _more_queues(keys):
        reads += [("GET", queue.requests_size), ("ZCARD", queue.leases)]
    return reads


def work_of(replies: Sequence[Any]) -> Work:
    """The replies to :func:`work_reads`; a missing counter (None) is 0."""
    seeds, queued, leased, items, processing = (int(reply or 0) for reply in replies[:5])
    others = [int(reply or 0) for reply in replies[5:]]
    return Work(seeds, queued + sum(others[::2]), leased + sum(others[1::2]), items, processing)


# --- A snapshot of the cluster ------------------------------------------------
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
    work: Work
    queues: dict[str, int]
    rejected: dict[str, int]
    dupefilter: int
    totals: dict[str, int]  # all-time counters of every worker, see heartbeat.metric_counters
    db_writer: dict[str, float]  # items_written, rejected, batches, last_batch_at
    lag: float | None  # age (s) of the oldest buffered item, 0 when none; None if unreadable
    workers: list[WorkerView]
    samples: list[tuple[float, int]]  # (time, pages total), oldest first; only when asked for
    # Proxy name -> Unix time (Redis clock) its cluster-wide ban ends; past bans may linger.
    proxy_bans: dict[str, float] = field(default_factory=dict)

    def proxies(self, now: float) -> dict[str, bool]:
        """Every proxy the crawl has used or banned -> whether it is banned at ``now``."""
        names = {k[len(PROXY_REQUESTS) :] for k in self.totals if k.startswith(PROXY_REQUESTS)}
        names |= {k[len(PROXY_BANS) :] for k in self.totals if k.startswith(PROXY_BANS)}
        names |= set(self.proxy_bans)
        return {name: self.proxy_bans.get(name, 0.0) > now for name in sorted(names)}

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


def _spider_reads(keys: RedisKeys, samples: bool) -> list[Command]:
    """The reads of one spider: fixed positions first (read_cluster's indexes),
    then the work of the other queues (other shards, render queues), then the
    rejected and seen counts of the shards but the first."""
    reads = work_reads(keys)[:5]
    reads += [("LLEN", keys.dead), ("LLEN", keys.requests_unserializable)]
    reads += [("LLEN", key) for key in _rejected_keys(keys)]
    reads += [
        ("SCARD", keys.dupefilter),
        ("HGETALL", keys.stats_totals),
        ("HGETALL", keys.db_writer_stats),
        ("LINDEX", keys.items_processing, 0),
        ("LINDEX", keys.items, 0),
        ("ZRANGE", keys.workers, 0, -1, "WITHSCORES"),
        ("ZRANGE", keys.proxies_banned, 0, -1, "WITHSCORES"),
        ("GET", keys.all_shards[0].seen),
        ("ZRANGE", keys.stats_samples, 0, -1) if samples else ("EXISTS", keys.stats_samples),
    ]
    assert len(reads) == _FIXED_READS, "read_cluster reads these by position"
    reads += _queues_work(keys)
    for shard in keys.all_shards[1:]:
        reads += [("LLEN", shard.requests_rejected), ("GET", shard.seen)]
    return reads


# Where the reads of the shards after the first start in _spider_reads' list.
_FIXED_READS = 20


def _rejected_keys(keys: RedisKeys) -> list[str]:
    return [
        keys.start_urls_rejected,
        keys.all_shards[0].requests_rejected,
        keys.items_rejected,
        keys.dead_rejected,
    ]


def read_cluster(
    send: Send,
    spiders: Sequence[str],
    *,
    worker_retention: float,
    samples: bool = False,
    keys_of: Callable[[str], RedisKeys] = RedisKeys,
    masters_memory: Callable[[], Sequence[Mapping[str, Any]]] | None = None,
) -> ClusterView:
    """Read the state of ``spiders`` in two round trips through ``send``.

    The first reads every fixed key of every spider, Redis' clock and memory;
    the second each listed worker's hash and heartbeat. The cost does not
    depend on how many stats there are, and nothing is written. Workers whose
    last publish is older than ``worker_retention`` seconds are left out (the
    next publish of any worker drops their entry). A spider named twice is
    read once. Errors are ``send``'s. ``keys_of`` gives a spider's keys (on a
    Redis Cluster: hash-tagged, with its frontier shards), and
    ``masters_memory`` every master's INFO memory (a Redis Cluster: one round
    trip more): the memory is then the fullest master's, the one that runs
    out first.
    """
    spiders = list(dict.fromkeys(spiders))
    reads: list[Command] = [("TIME",), ("INFO", "memory")]
    spider_keys = {spider: keys_of(spider) for spider in spiders}
    per_spider = [_spider_reads(spider_keys[spider], samples) for spider in spiders]
    for spider_reads in per_spider:
        reads += spider_reads
    replies = send("read_cluster", reads)
    now = _time(replies[0])
    memory = _info(replies[1])
    if masters_memory is not None:
        memory = fullest(masters_memory()) or memory
    at = 2
    partial: dict[str, dict[str, Any]] = {}
    listed: dict[str, list[tuple[str, float]]] = {}
    for spider, spider_reads in zip(spiders, per_spider, strict=True):
        r = replies[at : at + len(spider_reads)]
        at += len(spider_reads)
        shards = r[_FIXED_READS:]
        more = _more_queues(spider_keys[spider])
        n_other = 2 * len(more)
        work = work_of(r[0:5] + shards[:n_other])
        render = sum(
            int(shards[2 * i] or 0) for i, queue in enumerate(more) if queue.lane == RENDER
        )
        rejected = dict(zip(REJECTED, (int(n) for n in r[7:11]), strict=True))
        rejected["requests"] += sum(int(n or 0) for n in shards[n_other::2])
        seen_others = sum(int(n or 0) for n in shards[n_other + 1 :: 2])
        partial[spider] = {
            "work": work,
            "queues": {
                "start_urls": work.seeds,
                "requests": work.queued,
                "render": render,
                "leases": work.leased,
                "items": work.items,
                "items_processing": work.processing,
                "dead": int(r[5]),
                "rejected": sum(rejected.values()),
                "unserializable": int(r[6]),
            },
            "rejected": rejected,
            # The seen-set's count, and the previous release's set until migrated.
            "dupefilter": int(r[18] or 0) + seen_others + int(r[11]),
            "totals": counters_of(_hash(r[12])),
            "db_writer": _numbers(_hash(r[13])),
            "lag": _lag(now, r[14], r[15]),
            "proxy_bans": {_text(m): score / 1000 for m, score in _scored(r[17])},
            "samples": _samples(r[19]) if samples else [],
        }
        oldest = now - worker_retention
        listed[spider] = [(_text(m), score) for m, score in _scored(r[16]) if score >= oldest]
    workers = _read_workers(send, listed, spider_keys)
    return ClusterView(
        time=now,
        used_memory=int(memory.get("used_memory", 0)),
        maxmemory=int(memory.get("maxmemory", 0)),
        spiders=[
            SpiderView(spider=spider, workers=workers[spider], **partial[spider])
            for spider in spiders
        ],
    )


def _read_workers(
    send: Send, listed: dict[str, list[tuple[str, float]]], spider_keys: dict[str, RedisKeys]
) -> dict[str, list[WorkerView]]:
    """Second round trip: the hash and heartbeat of every listed worker."""
    found: dict[str, list[WorkerView]] = {spider: [] for spider in listed}
    reads: list[Command] = []
    for spider, workers in listed.items():
        k = spider_keys[spider]
        for worker, _ in workers:
            reads += [("HGETALL", k.worker_stats(worker)), ("EXISTS", k.worker_heartbeat(worker))]
    if not reads:
        return found
    replies = iter(send("read_cluster workers", reads))
    for spider, workers in listed.items():
        for worker, last_seen in workers:
            stats, alive = _hash(next(replies)), next(replies)
            found[spider].append(WorkerView(worker, last_seen, bool(alive), counters_of(stats)))
    return found


def counters_of(fields: Mapping[Any, Any]) -> dict[str, int]:
    """The metric counters among a hash's fields (pages, items, errors:*, responses:*,
    proxy_requests:*, proxy_bans:*)."""
    counters = {}
    for raw_name, raw_value in fields.items():
        name = _text(raw_name)
        if name in (PAGES, ITEMS) or name.startswith(
            (ERRORS, RESPONSES, PROXY_REQUESTS, PROXY_BANS)
        ):
            try:
                counters[name] = int(raw_value)
            except ValueError:
                continue
    return counters


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
    work = view.work.queued + view.work.leased
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
                "idle": s.work.idle,
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


# --- Replies, whichever way the client parsed them ----------------------------
def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _time(reply: Any) -> float:
    """TIME: [seconds, microseconds] (redis-py makes it a tuple of ints)."""
    seconds, micros = reply
    return int(seconds) + int(micros) / 1e6


def fullest(infos: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Of several nodes' INFO memory, the one nearest its maxmemory (the
    largest used_memory among nodes without a limit); {} for none."""

    def fill(info: Mapping[str, Any]) -> tuple[float, int]:
        used, limit = int(info.get("used_memory", 0)), int(info.get("maxmemory", 0))
        return (used / limit if limit else 0.0, used)

    parsed = [_info(info) for info in infos]
    return max(parsed, key=fill) if parsed else {}


def _info(reply: Any) -> dict[str, Any]:
    """INFO: redis-py parses it into a dict; a raw reply is "name:value" lines."""
    if isinstance(reply, Mapping):
        return dict(reply)
    info = {}
    for line in _text(reply).splitlines():
        name, sep, value = line.partition(":")
        if sep and not name.startswith("#"):
            info[name] = value.strip()
    return info


def _hash(reply: Any) -> Mapping[Any, Any]:
    """HGETALL: redis-py gives a dict; a raw reply is a flat [field, value, ...] list."""
    if isinstance(reply, Mapping):
        return reply
    return dict(zip(reply[::2], reply[1::2], strict=True))


def _scored(reply: Any) -> list[tuple[Any, float]]:
    """ZRANGE ... WITHSCORES: (member, score) pairs, or a flat [member, score, ...] list."""
    if reply and isinstance(reply[0], list | tuple):
        return [(member, float(score)) for member, score in reply]
    return [(member, float(score)) for member, score in zip(reply[::2], reply[1::2], strict=True)]


def _numbers(fields: Mapping[Any, Any]) -> dict[str, float]:
    numbers = {}
    for name, value in fields.items():
        try:
            numbers[_text(name)] = float(value)
        except ValueError:
            continue
    return numbers


def _lag(now: float, processing_head: Any, buffer_head: Any) -> float | None:
    """Age of the oldest item not yet in the database: the db_writer's batch in hand first."""
    head = processing_head if processing_head is not None else buffer_head
    if head is None:
        return 0.0
    try:
        entry = json.loads(head)
        # A worker's entry says when the item left its pipelines ("at"); an
        # entry of the previous release is the item, with its fetch time.
        at = entry["at"] if "at" in entry else entry["fetched_at"]
        return max(0.0, now - datetime.fromisoformat(at).timestamp())
    except (ValueError, KeyError, TypeError):
        return None


def _samples(members: list[Any]) -> list[tuple[float, int]]:
    samples = []
    for member in members:
        try:
            at, pages = member.split()
            samples.append((float(at), int(pages)))
        except ValueError:
            continue
    return samples
