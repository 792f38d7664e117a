"""A snapshot of the cluster, read in two round trips: what the monitor exports
and ``scrapy crawlstatus`` prints.

:func:`read_cluster` reads every fixed key of each spider (the queues and
their work, the rejected lists, the seen-set, the totals of the workers'
counters, the db_writer's stats, the item lag, the listed workers and the
proxy bans, the cookie jars' number and their cookies) and Redis' clock and
memory in one round trip, then each listed worker's hash and heartbeat in a
second. The hosts an operator steers
(``host_steering.py``) come with the first. What it reads is named in
:mod:`spiders_project.read_model.contract`; the replies of either client are read by
:mod:`spiders_project.read_model.replies`. Standard library only (the monitor
imports it without Scrapy), and nothing here talks to Redis: the caller's
``send`` does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from spiders_project.keys import RENDER, RedisKeys
from spiders_project.keys.cookies import cookie_counts, cookie_jars
from spiders_project.keys.db_writers import processing_of
from spiders_project.read_model.contract import (
    CUT_OFF,
    PAGES,
    PROXY_BANS,
    PROXY_REQUESTS,
    REJECTED,
    Command,
    Send,
    Work,
    counters_of,
    more_queues,
    queues_work,
    work_of,
    work_reads,
)
from spiders_project.read_model.host_steering import HostSteer, parse_steering
from spiders_project.read_model.job_progress import JobProgress, count_keys, job_progress
from spiders_project.read_model.replies import (
    fullest,
    hash_fields,
    info,
    numbers,
    redis_time,
    scored,
    text,
)
from spiders_project.read_model.writers import holding, item_lag


@dataclass(frozen=True)
class WorkerView:
    """One listed worker: alive while its heartbeat key exists."""

    worker: str
    last_seen: float  # Unix time of its last publish, Redis clock
    alive: bool
    counters: dict[str, int]
    cut_off: bool = False  # node health took it out of the crawl (contract.CUT_OFF)


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
    # Hosts an operator steers (scrapy frontier host): delay, cap, blocked.
    steered: dict[str, HostSteer] = field(default_factory=dict)
    # Every crawl job's progress (job_progress.py), by id.
    jobs: list[JobProgress] = field(default_factory=list)
    # The shared cookie jars: how many, and the cookies in them (read_cookie_counts).
    cookie_jars: int = 0
    cookies: int = 0

    @property
    def hosts_blocked(self) -> int:
        return sum(1 for s in self.steered.values() if s.blocked)

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
        ("LINDEX", keys.items, 0),
        ("ZRANGE", keys.workers, 0, -1, "WITHSCORES"),
        ("ZRANGE", keys.proxies_banned, 0, -1, "WITHSCORES"),
        ("GET", keys.all_shards[0].seen),
        ("ZRANGE", keys.stats_samples, 0, -1) if samples else ("EXISTS", keys.stats_samples),
        ("HGETALL", keys.host_steering),
        ("ZCARD", cookie_jars(keys)),
        ("HLEN", cookie_counts(keys)),
        ("HRANDFIELD", cookie_counts(keys), COOKIE_COUNTS_READ, "WITHVALUES"),
    ]
    assert len(reads) == _FIXED_READS, "read_cluster reads these by position"
    reads += queues_work(keys)
    for shard in keys.all_shards[1:]:
        reads += [("LLEN", shard.requests_rejected), ("GET", shard.seen)]
    return reads


# Where the reads of the shards after the first start in _spider_reads' list.
_FIXED_READS = 23
# Jars whose counts one scrape reads (HRANDFIELD with a count: at most this
# many fields, each distinct). A spider with more meta["cookiejar"] sessions
# has its cookies estimated from that random sample, so a scrape's cost does
# not grow with the sessions.
COOKIE_COUNTS_READ = 10_000


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
    # Then, per spider, its job records and per-job counts (job_progress.py).
    per_jobs = [
        [("HGETALL", keys.jobs), *(("HGETALL", k) for k in count_keys(keys))]
        for keys in spider_keys.values()
    ]
    for spider_reads in per_spider:
        reads += spider_reads
    for job_reads in per_jobs:
        reads += job_reads
    replies = send("read_cluster", reads)
    now = redis_time(replies[0])
    memory = info(replies[1])
    if masters_memory is not None:
        memory = fullest(masters_memory()) or memory
    at = 2 + sum(len(spider_reads) for spider_reads in per_spider)
    jobs: dict[str, list[JobProgress]] = {}
    for spider, job_reads in zip(spiders, per_jobs, strict=True):
        records, *counts = (hash_fields(h) for h in replies[at : at + len(job_reads)])
        at += len(job_reads)
        jobs[spider] = job_progress(records, counts, int(now * 1000))
    at = 2
    partial: dict[str, dict[str, Any]] = {}
    listed: dict[str, list[tuple[str, float]]] = {}
    held: dict[str, list[str]] = {}  # the db_writers holding a batch
    buffer_heads: dict[str, Any] = {}
    for spider, spider_reads in zip(spiders, per_spider, strict=True):
        r = replies[at : at + len(spider_reads)]
        at += len(spider_reads)
        shards = r[_FIXED_READS:]
        more = more_queues(spider_keys[spider])
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
            "dupefilter": int(r[17] or 0) + seen_others + int(r[11]),
            "totals": counters_of(hash_fields(r[12])),
            "db_writer": numbers(hash_fields(r[13])),
            "proxy_bans": {text(m): score / 1000 for m, score in scored(r[16])},
            "samples": parse_samples(r[18]) if samples else [],
            "steered": parse_steering(hash_fields(r[19]))[0],
            "cookie_jars": int(r[20]),
            "cookies": read_cookie_counts(int(r[21]), r[22]),
        }
        buffer_heads[spider] = r[14]
        held[spider] = holding(r[4])
        oldest = now - worker_retention
        listed[spider] = [(text(m), score) for m, score in scored(r[15]) if score >= oldest]
    workers, processing_heads = _second_trip(send, listed, held, spider_keys)
    for spider in spiders:
        partial[spider]["lag"] = item_lag(now, processing_heads[spider], buffer_heads[spider])
    return ClusterView(
        time=now,
        used_memory=int(memory.get("used_memory", 0)),
        maxmemory=int(memory.get("maxmemory", 0)),
        spiders=[
            SpiderView(spider=spider, workers=workers[spider], jobs=jobs[spider], **partial[spider])
            for spider in spiders
        ],
    )


def _second_trip(
    send: Send,
    listed: dict[str, list[tuple[str, float]]],
    holding: dict[str, list[str]],
    spider_keys: dict[str, RedisKeys],
) -> tuple[dict[str, list[WorkerView]], dict[str, list[Any]]]:
    """Second round trip: the hash and heartbeat of every listed worker, and the
    head of each db_writer's batch (the first entry of its processing list)."""
    found: dict[str, list[WorkerView]] = {spider: [] for spider in listed}
    heads: dict[str, list[Any]] = {spider: [] for spider in listed}
    reads: list[Command] = []
    for spider, workers in listed.items():
        k = spider_keys[spider]
        for worker, _ in workers:
            reads += [("HGETALL", k.worker_stats(worker)), ("EXISTS", k.worker_heartbeat(worker))]
        reads += [("LINDEX", processing_of(k, w), 0) for w in holding[spider]]
    if not reads:
        return found, heads
    replies = iter(send("read_cluster workers", reads))
    for spider, workers in listed.items():
        for worker, last_seen in workers:
            stats, alive = hash_fields(next(replies)), next(replies)
            cut_off = any(text(k) == CUT_OFF and text(v) == "1" for k, v in stats.items())
            found[spider].append(
                WorkerView(worker, last_seen, bool(alive), counters_of(stats), cut_off)
            )
        heads[spider] = [next(replies) for _ in holding[spider]]
    return found, heads


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
                "cookies": {"jars": s.cookie_jars, "cookies": s.cookies},
                "workers_alive": s.workers_alive,
                "jobs": [job.as_dict() for job in s.jobs],
                "hosts": {
                    "blocked": s.hosts_blocked,
                    "steered": {
                        host: {"delay": h.delay, "cap": h.cap, "blocked": h.blocked}
                        for host, h in sorted(s.steered.items())
                    },
                },
                "workers": [
                    {
                        "worker": w.worker,
                        "alive": w.alive,
                        "last_seen": w.last_seen,
                        "counters": w.counters,
                        "cut_off": w.cut_off,
                    }
                    for w in s.workers
                ],
            }
            for s in view.spiders
        ],
    }


# --- What the replies hold ------------------------------------------------------
def read_cookie_counts(jars: int, sample: Any) -> int:
    """The cookies of ``jars`` jars (HLEN of the counts) from HRANDFIELD's ``sample``
    of their counts: their sum when it has every jar, else scaled up to all of them.
    A count that is not a number (not a worker's) counts as 0."""
    counts = hash_fields(sample)
    total = 0
    for count in counts.values():
        try:
            total += int(count)
        except ValueError:
            continue
    if not counts or len(counts) >= jars:
        return total
    return round(total * jars / len(counts))


def parse_samples(members: list[Any]) -> list[tuple[float, int]]:
    """(time, pages total) of "<time> <pages total>" members (``stats:samples``,
    ``stats:history``), in their order; others left out."""
    samples = []
    for member in members:
        try:
            at, pages = member.split()
            samples.append((float(at), int(pages)))
        except ValueError:
            continue
    return samples
