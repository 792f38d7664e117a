"""The Prometheus collector: reads Redis when scraped and turns it into ``crawler_*`` metrics.

Counters and monotonicity: each worker's ``crawler_*_total{worker=...}`` series
is that process' own count (its Scrapy stats). A restarted worker is a new
process, so a new ``host:pid`` and a new series from 0; the old series stays,
frozen, while the old worker is listed (``STATS_WORKER_RETENTION`` after a
crash; not at all after a clean stop). Use ``rate()`` on those. The
``crawler_spider_*_total{spider=...}`` series are the spider's all-time totals,
which the workers' publishes only ever add to: they never go down when workers
come and go, so they are what throughput panels and ``increase()`` should use.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import redis
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from monitor.archive_metrics import warc_metrics
from monitor.cookie_metrics import cookie_metrics
from spiders_project.keys import RedisKeys
from spiders_project.read_model.cluster_view import ClusterView, SpiderView, read_cluster
from spiders_project.read_model.contract import (
    ERRORS,
    ITEMS,
    PAGES,
    PROXY_BANS,
    PROXY_REQUESTS,
    QUEUES,
    REJECTED,
    RESPONSES,
)
from spiders_project.redis_access import RedisUnavailable, SyncRedisCalls

logger = logging.getLogger("monitor")


class CrawlerCollector(Collector):
    """Every ``crawler_*`` metric, from one :func:`read_cluster` per scrape.

    ``crawler_redis_up`` is 0, and no family but it and the scrape duration is
    exposed, whenever this scrape could not read the crawl's state:

    - Redis unreachable, or refusing for a while what it would take later
      (LOADING after a restart, BUSY during a long script; see
      ``redis_calls.classify``): :class:`RedisUnavailable` at once, never
      retried within a scrape. The shared state logs one line when this
      starts, and one when a lost connection comes back.
    - Redis answering a read with an error that does not pass by itself, e.g.
      WRONGTYPE on a key someone overwrote: the call path logs the reply with
      its command, on every scrape until the key is fixed.

    0 rather than 1 with the broken families left out: a pipeline's first
    error reply fails the whole read, so there is no partial reading to
    expose without reading each family on its own, and an exporter that
    cannot read the crawl is what ``CrawlerRedisDown`` (``crawler_redis_up ==
    0``) is for; its log says which case it is.
    """

    def __init__(
        self,
        calls: SyncRedisCalls,
        spiders: Sequence[str],
        *,
        worker_retention: float,
        keys_of: Callable[[str], RedisKeys] = RedisKeys,
        masters_memory: Callable[[], Sequence[Mapping[str, Any]]] | None = None,
    ) -> None:
        self.calls = calls
        self.spiders = tuple(spiders)
        self.worker_retention = worker_retention
        self.keys_of = keys_of  # a spider's keys (Redis Cluster: with its shards)
        self.masters_memory = masters_memory  # Redis Cluster: every master's INFO memory

    def read(self) -> ClusterView | None:
        """The cluster's state, or None when this scrape cannot read it (see the class)."""
        try:
            # Reads are never retried within a scrape: "Redis down" now, not later.
            send = functools.partial(self.calls.pipelined, retry=False)
            return read_cluster(
                send,
                self.spiders,
                worker_retention=self.worker_retention,
                keys_of=self.keys_of,
                masters_memory=self.masters_memory,
            )
        except RedisUnavailable:
            return None  # the state logged the change
        except redis.RedisError:
            return None  # the call path logged the reply with its command

    def collect(self) -> Iterator[Metric]:
        started = time.perf_counter()
        view = self.read()
        up = GaugeMetricFamily(
            "crawler_redis_up",
            "1 if the exporter could read the crawl's state from Redis during this scrape, "
            "else 0 (its log says why).",
        )
        up.add_metric([], 1 if view is not None else 0)
        yield up
        if view is not None:
            yield from redis_metrics(view)
            yield from spider_metrics(view.spiders, view.time)
        duration = GaugeMetricFamily(
            "crawler_scrape_duration_seconds", "Seconds this scrape spent reading Redis."
        )
        duration.add_metric([], time.perf_counter() - started)
        yield duration


def redis_metrics(view: ClusterView) -> Iterator[Metric]:
    used = GaugeMetricFamily(
        "crawler_redis_used_memory_bytes",
        "Memory Redis has allocated (INFO used_memory); on a Redis Cluster, the "
        "master's nearest its maxmemory.",
    )
    used.add_metric([], view.used_memory)
    yield used
    limit = GaugeMetricFamily(
        "crawler_redis_maxmemory_bytes",
        "Redis' maxmemory setting (on a Redis Cluster, that master's); 0 means no limit.",
    )
    limit.add_metric([], view.maxmemory)
    yield limit


def spider_metrics(spiders: Sequence[SpiderView], now: float) -> Iterator[Metric]:
    """Every per-spider and per-worker family, even when empty (HELP and TYPE stay)."""
    s, sw = ["spider"], ["spider", "worker"]
    queue = GaugeMetricFamily(
        "crawler_queue_length",
        "Entries waiting in each Redis structure of the crawl: start_urls (seeds), requests "
        "(queued), leases (being fetched), items and items_processing (not yet in the "
        "database), dead (failed for good), rejected (unreadable entries set aside), "
        "unserializable (requests a spider made that the frontier cannot store).",
        labels=["spider", "queue"],
    )
    rejected = GaugeMetricFamily(
        "crawler_rejected_entries",
        "Unreadable entries set aside, by the list they were found in.",
        labels=["spider", "source"],
    )
    dupefilter = GaugeMetricFamily(
        "crawler_dupefilter_size", "Request fingerprints seen by the cluster.", labels=s
    )
    alive = GaugeMetricFamily(
        "crawler_workers_alive", "Workers whose heartbeat key exists.", labels=s
    )
    worker_up = GaugeMetricFamily(
        "crawler_worker_up",
        "1 while the worker's heartbeat lives; 0 for a worker that stopped publishing "
        "without signing off (killed, crashed, node down), until STATS_WORKER_RETENTION.",
        labels=sw,
    )
    cut_off = GaugeMetricFamily(
        "crawler_worker_cut_off",
        "1 while the worker found itself cut off from the sites the cluster reaches "
        "(its fetches all failed while other workers fetched pages): it fetches nothing "
        "and probes until it reaches them again (NODE_* settings).",
        labels=sw,
    )
    last_seen = GaugeMetricFamily(
        "crawler_worker_last_seen_seconds",
        "Unix time of the worker's last stats publish (Redis' clock).",
        labels=sw,
    )
    pages = CounterMetricFamily(
        "crawler_pages", "Responses that reached the spider, by worker process.", labels=sw
    )
    items = CounterMetricFamily("crawler_items", "Items scraped, by worker process.", labels=sw)
    errors = CounterMetricFamily(
        "crawler_errors",
        "Errors by kind, by worker process: download:<Exception> (each failed download), "
        "spider:<Exception>, dead_letter, seed_rejected, frontier_rejected.",
        labels=[*sw, "kind"],
    )
    responses = CounterMetricFamily(
        "crawler_responses",
        "HTTP responses the downloader received (retried ones too), by worker and status.",
        labels=[*sw, "status"],
    )
    spider_pages = CounterMetricFamily(
        "crawler_spider_pages",
        "Responses that reached the spider, all workers ever (never goes down on restarts).",
        labels=s,
    )
    spider_items = CounterMetricFamily(
        "crawler_spider_items", "Items scraped, all workers ever.", labels=s
    )
    spider_errors = CounterMetricFamily(
        "crawler_spider_errors", "Errors by kind, all workers ever.", labels=["spider", "kind"]
    )
    spider_responses = CounterMetricFamily(
        "crawler_spider_responses",
        "HTTP responses received by status, all workers ever.",
        labels=["spider", "status"],
    )
    written = CounterMetricFamily(
        "crawler_db_writer_items_written", "Items the db_writer committed.", labels=s
    )
    writer_rejected = CounterMetricFamily(
        "crawler_db_writer_rejected", "Buffered entries the db_writer set aside.", labels=s
    )
    batches = CounterMetricFamily(
        "crawler_db_writer_batches", "Transactions the db_writer committed.", labels=s
    )
    last_batch = GaugeMetricFamily(
        "crawler_db_writer_last_batch_timestamp_seconds",
        "Unix time of the db_writer's last committed batch.",
        labels=s,
    )
    lag = GaugeMetricFamily(
        "crawler_db_writer_lag_seconds",
        "Age of the oldest item not yet in the database (when the oldest head of the "
        "db_writers' processing lists, else of items, left its worker); 0 when empty.",
        labels=s,
    )
    proxy_requests = CounterMetricFamily(
        "crawler_proxy_requests",
        "Requests sent through each proxy (scheme://host:port), all workers ever.",
        labels=["spider", "proxy"],
    )
    proxy_bans = CounterMetricFamily(
        "crawler_proxy_bans",
        "Times each proxy was banned for the cluster (a block, or repeated connection "
        "failures), all workers ever.",
        labels=["spider", "proxy"],
    )
    proxy_banned = GaugeMetricFamily(
        "crawler_proxy_banned",
        "1 while the proxy is banned for the whole cluster (PROXY_BAN_TIME), else 0.",
        labels=["spider", "proxy"],
    )
    all_banned = GaugeMetricFamily(
        "crawler_proxies_all_banned",
        "1 while every proxy the crawl uses is banned: requests wait for the first ban to end "
        "(0 without proxies).",
        labels=s,
    )
    for view in spiders:
        name = view.spider
        states = view.proxies(now)
        for proxy, banned in states.items():
            proxy_requests.add_metric([name, proxy], view.totals.get(PROXY_REQUESTS + proxy, 0))
            proxy_bans.add_metric([name, proxy], view.totals.get(PROXY_BANS + proxy, 0))
            proxy_banned.add_metric([name, proxy], 1 if banned else 0)
        all_banned.add_metric([name], 1 if states and all(states.values()) else 0)
        for q in QUEUES:
            queue.add_metric([name, q], view.queues[q])
        for source in REJECTED:
            rejected.add_metric([name, source], view.rejected[source])
        dupefilter.add_metric([name], view.dupefilter)
        alive.add_metric([name], view.workers_alive)
        for w in view.workers:
            labels = [name, w.worker]
            worker_up.add_metric(labels, 1 if w.alive else 0)
            cut_off.add_metric(labels, 1 if w.cut_off else 0)
            last_seen.add_metric(labels, w.last_seen)
            pages.add_metric(labels, w.counters.get(PAGES, 0))
            items.add_metric(labels, w.counters.get(ITEMS, 0))
            for kind, value in _by_prefix(w.counters, ERRORS):
                errors.add_metric([*labels, kind], value)
            for status, value in _by_prefix(w.counters, RESPONSES):
                responses.add_metric([*labels, status], value)
        spider_pages.add_metric([name], view.totals.get(PAGES, 0))
        spider_items.add_metric([name], view.totals.get(ITEMS, 0))
        for kind, value in _by_prefix(view.totals, ERRORS):
            spider_errors.add_metric([name, kind], value)
        for status, value in _by_prefix(view.totals, RESPONSES):
            spider_responses.add_metric([name, status], value)
        written.add_metric([name], view.db_writer.get("items_written", 0))
        writer_rejected.add_metric([name], view.db_writer.get("rejected", 0))
        batches.add_metric([name], view.db_writer.get("batches", 0))
        if "last_batch_at" in view.db_writer:
            last_batch.add_metric([name], view.db_writer["last_batch_at"])
        if view.lag is not None:
            lag.add_metric([name], view.lag)
    yield from (queue, rejected, dupefilter, alive, worker_up, cut_off, last_seen)
    yield from (pages, items, errors, responses)
    yield from (spider_pages, spider_items, spider_errors, spider_responses)
    yield from (written, writer_rejected, batches, last_batch, lag)
    yield all_banned
    if proxy_banned.samples:  # per-proxy families only for crawls that use proxies
        yield from (proxy_requests, proxy_bans, proxy_banned)
    yield from host_metrics(spiders)
    yield from job_metrics(spiders)
    yield from warc_metrics(spiders)
    yield from cookie_metrics(spiders)


# Hosts with series of their own in crawler_host_overrides, per spider: blocked
# ones first, then by name. Operators steer a few hosts; a script that steered
# thousands must not make as many series (the counts still cover them all).
HOST_SERIES_MAX = 50


def host_metrics(spiders: Sequence[SpiderView]) -> Iterator[Metric]:
    """The hosts an operator steers (scrapy frontier host): counts, and each one's overrides."""
    blocked = GaugeMetricFamily(
        "crawler_hosts_blocked",
        "Hosts blocked by an operator (scrapy frontier host).",
        labels=["spider"],
    )
    steered = GaugeMetricFamily(
        "crawler_hosts_steered",
        "Hosts with an operator's delay, cap or block (scrapy frontier host).",
        labels=["spider"],
    )
    overrides = GaugeMetricFamily(
        "crawler_host_overrides",
        "An operator's override of a host: kind delay_seconds, cap, or blocked (1); "
        f"at most {HOST_SERIES_MAX} hosts a spider, blocked ones first.",
        labels=["spider", "host", "kind"],
    )
    for view in spiders:
        blocked.add_metric([view.spider], view.hosts_blocked)
        steered.add_metric([view.spider], len(view.steered))
        order = sorted(view.steered.items(), key=lambda item: (not item[1].blocked, item[0]))
        for host, steer in order[:HOST_SERIES_MAX]:
            if steer.delay is not None:
                overrides.add_metric([view.spider, host, "delay_seconds"], steer.delay)
            if steer.cap is not None:
                overrides.add_metric([view.spider, host, "cap"], steer.cap)
            if steer.blocked:
                overrides.add_metric([view.spider, host, "blocked"], 1)
    yield from (blocked, steered, overrides)


# Every state a job can be in: crawler_job_state has one series per state, 1 for
# the job's (a state change is a change of which series is 1).
JOB_STATES = ("running", "paused", "cancelled", "finished")


def job_metrics(spiders: Sequence[SpiderView]) -> Iterator[Metric]:
    """Every crawl job's progress (job_progress.py): exact counts, ETA and state.

    The job's label is ``crawl_job``: Prometheus gives every scraped series its
    target's ``job`` label (``job="crawler"``) and would rename ours
    ``exported_job``.
    """
    labels = ["spider", "crawl_job"]
    pages = CounterMetricFamily(
        "crawler_job_pages",
        "Pages a job fetched (responses that reached the spider).",
        labels=labels,
    )
    items = CounterMetricFamily("crawler_job_items", "Items a job scraped.", labels=labels)
    queued = GaugeMetricFamily(
        "crawler_job_queued", "Requests of a job queued, backing off included.", labels=labels
    )
    in_flight = GaugeMetricFamily(
        "crawler_job_in_flight",
        "Requests of a job being downloaded: its leases holding one of their host's download "
        "slots (the cluster-wide cap, CONCURRENT_REQUESTS_PER_DOMAIN).",
        labels=labels,
    )
    leased = GaugeMetricFamily(
        "crawler_job_leased",
        "Requests of a job leased by a worker and not downloading: not started yet (spare "
        "leases waiting for a slot, prefetched requests) or downloaded and awaiting their ack.",
        labels=labels,
    )
    dead = GaugeMetricFamily(
        "crawler_job_dead_letters", "Requests of a job that ended as dead letters.", labels=labels
    )
    eta = GaugeMetricFamily(
        "crawler_job_eta_seconds",
        "Estimate: a job's queued requests over its pages/s of the last minute "
        "(no series while it fetches nothing).",
        labels=labels,
    )
    state = GaugeMetricFamily(
        "crawler_job_state", "1 for a job's state, 0 for the others.", labels=[*labels, "state"]
    )
    for view in spiders:
        for job in view.jobs:
            at = [view.spider, job.id]
            pages.add_metric(at, job.pages)
            items.add_metric(at, job.items)
            queued.add_metric(at, job.queued + job.backing_off)
            in_flight.add_metric(at, job.in_flight)
            leased.add_metric(at, job.leased)
            dead.add_metric(at, job.dead_letters)
            if job.eta_s is not None:
                eta.add_metric(at, job.eta_s)
            for name in JOB_STATES:
                state.add_metric([*at, name], 1 if job.state == name else 0)
    yield from (pages, items, queued, in_flight, leased, dead, eta, state)


def _by_prefix(counters: dict[str, int], prefix: str) -> list[tuple[str, int]]:
    return sorted((k[len(prefix) :], v) for k, v in counters.items() if k.startswith(prefix))
