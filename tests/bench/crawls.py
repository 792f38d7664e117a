"""The crawl phases: one setup at a time against the same site and a fresh private Redis.

Every phase is measured the same way, by a loop in the benchmark process that
samples every ``SAMPLE_INTERVAL`` seconds:

- pages: requests the site served (its own count, so the same for every setup);
- CPU seconds and RSS of each crawler process (psutil);
- Redis ``INFO`` (commands by name, CPU, used memory) when the first page is
  served and when the window closes;
- the machine's busy CPU time, to tell how much other processes took.

Throughput comes from the site's arrival times of the first ``window`` pages;
per-page costs are deltas between the two samples divided by the pages served
in between.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from spiders_project.keys import RedisKeys
from tests.bench.site_proc import Site
from tests.support.processes import PYTHON, ROOT, Proc
from tests.support.services import RedisServer, pin

SAMPLE_INTERVAL = 0.2
# Commands the benchmark itself sends (INFO, CONFIG RESETSTAT, ...), not the crawler.
OWN_COMMANDS = {"info", "config|resetstat", "flushall", "ping", "memory|usage", "scard", "scan"}
OURS = RedisKeys("distributed")
STOCK = RedisKeys("stock")


def pin_apart() -> tuple[set[int] | None, set[int] | None]:
    """``make bench``'s pinning on two cores or more: crawlers on CPU 0; the site,
    Redis and this process on CPU 1 (this process pinned here). Returns (the
    crawlers' CPUs, the services' CPUs), both None on one core."""
    if (os.cpu_count() or 1) < 2:
        return None, None
    pin(os.getpid(), {1})
    return {0}, {1}


@dataclass
class Sample:
    t: float
    pages: int
    cpu: list[float]
    rss: list[int]
    alive: list[bool]
    site_cpu: float
    own_cpu: float  # site + Redis + this process
    machine_busy: float


@dataclass
class CrawlResult:
    """What one phase measured; None where it does not apply (no Redis)."""

    name: str
    processes: int
    window: int
    pages_per_s: float
    cpu_ms_per_page: float
    site_core_share: float
    other_cores: float
    wall: float
    items: int = 0
    round_trips_per_page: float | None = None
    commands_per_page: float | None = None
    top_commands: list[tuple[str, float]] = field(default_factory=list)
    redis_cpu_per_10k: float | None = None
    dupefilter_bytes_per_fp: float | None = None
    rss_start: int = 0
    rss_end: int = 0
    rss_peak: int = 0  # the largest RSS of one crawler process until the window closed
    pages_total: int = 0
    # Whole-crawl figures, for the phase that runs to the end.
    full: dict[str, float] = field(default_factory=dict)
    exit_codes: list[int] = field(default_factory=list)
    logs: list[Path] = field(default_factory=list)

    @property
    def redis_ceiling(self) -> float | None:
        if not self.redis_cpu_per_10k:
            return None
        return 10_000 / self.redis_cpu_per_10k


def stats_file(log_dir: Path, name: str) -> Path:
    """Where ``tests.bench.run_spider`` leaves the final stats of crawler ``name``."""
    return log_dir / f"{name}.stats.json"


def machine_busy() -> float:
    t = psutil.cpu_times()
    return t.user + t.nice + t.system + t.irq + t.softirq + getattr(t, "steal", 0.0)


class Bench:
    """The shared site and Redis, and how crawlers are started on them."""

    def __init__(
        self,
        site: Site,
        redis: RedisServer,
        log_dir: Path,
        crawl_cpus: set[int] | None,
        service_cpus: set[int] | None,
        settings: list[str] | None = None,
    ) -> None:
        self.site = site
        self.redis = redis
        self.log_dir = log_dir
        self.crawl_cpus = crawl_cpus
        self.service_cpus = service_cpus
        self.me = psutil.Process()
        # NAME=VALUE settings given to every crawler, after the phase's own.
        self.settings = list(settings or [])
        # Environment variables every crawler gets besides REDIS_URL (a phase's own).
        self.env: dict[str, str] = {}

    def _settings_argv(self, *own: str) -> list[str]:
        argv: list[str] = []
        for s in (*own, *self.settings):
            argv += ["-s", s]
        return argv

    # --- the crawlers ----------------------------------------------------------
    def _proc(self, name: str, argv: list[str], cpus: set[int] | None, cwd: Path = ROOT) -> Proc:
        env = {"REDIS_URL": self.redis.url, **self.env}
        return Proc(name, argv, env, self.log_dir / f"{name}.log", cpus=cpus, cwd=cwd)

    def worker(self, name: str, *settings: str, cpus: set[int] | None, cwd: Path = ROOT) -> Proc:
        """``scrapy crawl distributed``, exactly as deployed, plus ``-s`` settings; ``cwd``
        another checkout's root runs that checkout's project (``jobs.py``: an older commit)."""
        argv = [PYTHON, "-m", "scrapy", "crawl", "distributed"]
        argv += self._settings_argv("LOG_LEVEL=INFO", *settings)
        return self._proc(name, argv, cpus, cwd)

    def plain(self, name: str, cpus: set[int] | None) -> Proc:
        argv = [PYTHON, "-m", "tests.bench.run_spider", "plain", "--url", self.site.url]
        argv += ["--stats-file", str(stats_file(self.log_dir, name))]
        return self._proc(name, argv + self._settings_argv(), cpus)

    def stock(self, name: str, cpus: set[int] | None) -> Proc:
        argv = [PYTHON, "-m", "tests.bench.run_spider", "stock"]
        argv += ["--stats-file", str(stats_file(self.log_dir, name))]
        return self._proc(name, argv + self._settings_argv("MAX_IDLE_TIME_BEFORE_CLOSE=2"), cpus)

    def final_stats(self, proc: Proc) -> dict[str, str]:
        """The stats a crawler ended with: what a worker published to Redis, or the file
        ``run_spider`` wrote (plain Scrapy and stock scrapy-redis publish nothing)."""
        path = stats_file(self.log_dir, proc.name)
        if path.exists():
            return {k: str(v) for k, v in json.loads(path.read_text()).items()}
        raw = self.redis.client.hgetall(OURS.worker_stats(f"{socket.gethostname()}:{proc.pid}"))
        return {k.decode(): v.decode() for k, v in raw.items()}

    # --- one phase ---------------------------------------------------------------
    def _sample(self, procs: list[Proc]) -> Sample:
        site_cpu = self.site.proc.cpu()
        return Sample(
            t=time.monotonic(),
            pages=self.site.count(),
            cpu=[p.cpu() for p in procs],
            rss=[p.rss() for p in procs],
            alive=[p.alive() for p in procs],
            site_cpu=site_cpu,
            own_cpu=site_cpu + self.redis.cpu() + sum(self.me.cpu_times()[:2]),
            machine_busy=machine_busy(),
        )

    def run(
        self,
        name: str,
        start: Callable[[], list[Proc]],
        *,
        window: int,
        to_the_end: bool = False,
        seed_key: str | None = None,
        seed: str | list[str] | None = None,
        redis_keys: RedisKeys | None = None,
        timeout: float = 600,
    ) -> CrawlResult:
        """Run the crawlers ``start`` returns until ``window`` pages (or the end).

        With ``to_the_end`` the crawl runs until the crawlers exit by themselves;
        otherwise they get SIGTERM (a graceful stop) once the site has served
        ``window`` pages. ``seed`` (or each of a list) is pushed to ``seed_key``: the site's root
        by default.
        """
        self.redis.reset()
        self.site.reset()
        if seed_key is not None:
            seeds = [self.site.url] if seed is None else [seed] if isinstance(seed, str) else seed
            self.redis.client.lpush(seed_key, *seeds)
        memory_before = self.redis.sample()["memory"]
        started = time.monotonic()
        procs = start()
        first: Sample | None = None
        win: Sample | None = None
        last_alive: Sample | None = None
        redis_first = redis_win = None
        rss_peak = 0
        try:
            while True:
                sample = self._sample(procs)
                if win is None:
                    rss_peak = max(rss_peak, *sample.rss)
                # The last sample of running crawlers: one exiting between the
                # two reads shows as alive with an RSS of 0 (the run of
                # 2026-11-27 01:39 reported "101 -> 0 MB"), so it does not count.
                if any(sample.alive) and all(
                    rss > 0 for rss, alive in zip(sample.rss, sample.alive, strict=True) if alive
                ):
                    last_alive = sample
                if first is None and sample.pages > 0:
                    first, redis_first = sample, self.redis.sample()
                if first is not None and win is None and sample.pages >= window:
                    win, redis_win = sample, self.redis.sample()
                    if not to_the_end:
                        for p in procs:
                            p.signal(signal.SIGTERM)
                if not any(sample.alive):
                    break
                if sample.t - started > timeout:
                    raise RuntimeError(
                        f"{name}: not done after {timeout:.0f} s; logs in {self.log_dir}"
                    )
                time.sleep(SAMPLE_INTERVAL)
            codes = [p.stop(60) for p in procs]
        finally:
            for p in procs:
                p.close()
        if first is None or win is None or last_alive is None:
            raise RuntimeError(
                f"{name}: the site served {self.site.count()} of {window} pages; "
                f"logs in {self.log_dir}"
            )
        final = [self.final_stats(p) for p in procs]
        times = self.site.page_times()
        wall = win.t - first.t
        pages = win.pages - first.pages
        others = (win.machine_busy - first.machine_busy) - (
            (win.own_cpu - first.own_cpu) + (sum(win.cpu) - sum(first.cpu))
        )
        result = CrawlResult(
            name=name,
            processes=len(procs),
            window=window,
            pages_per_s=(window - 1) / (times[window - 1] - times[0]),
            cpu_ms_per_page=1000 * (sum(win.cpu) - sum(first.cpu)) / pages,
            site_core_share=(win.site_cpu - first.site_cpu) / wall,
            other_cores=max(0.0, others / wall),
            wall=last_alive.t - started,
            items=sum(int(f.get("item_scraped_count", 0)) for f in final),
            rss_start=max(first.rss),
            rss_end=max(last_alive.rss),
            rss_peak=rss_peak,
            pages_total=len(times),
            exit_codes=codes,
            logs=[p.log_path for p in procs],
        )
        if redis_keys is not None:
            assert redis_first is not None and redis_win is not None
            calls = _delta(redis_first["calls"], redis_win["calls"])
            result.commands_per_page = sum(calls.values()) / pages
            result.top_commands = [
                (cmd, n / pages) for cmd, n in sorted(calls.items(), key=lambda kv: -kv[1])
            ]
            result.redis_cpu_per_10k = 10_000 * (redis_win["cpu"] - redis_first["cpu"]) / pages
            trips = sum(int(f.get("redis/round_trips", 0)) for f in final)
            result.round_trips_per_page = trips / max(1, result.items)
            client = self.redis.client
            # Ours: the seen-set's counter and buckets; stock: its set of hex strings.
            seen = int(client.get(redis_keys.seen) or 0) or int(client.scard(redis_keys.dupefilter))
            if seen:
                parts = [redis_keys.dupefilter, *client.scan_iter(match=redis_keys.seen_parts)]
                usage = sum(int(client.memory_usage(k, samples=0) or 0) for k in parts)
                result.dupefilter_bytes_per_fp = usage / seen
            if to_the_end:
                end = self.redis.sample()
                calls = _delta(redis_first["calls"], end["calls"])
                pages_all = last_alive.pages - first.pages
                items_bytes = client.memory_usage(redis_keys.items, samples=0) or 0
                result.full = {
                    "pages": last_alive.pages,
                    "pages_per_s": (len(times) - 1) / (times[-1] - times[0]),
                    "commands_per_page": sum(calls.values()) / pages_all,
                    "redis_cpu_per_10k": 10_000 * (end["cpu"] - redis_first["cpu"]) / pages_all,
                    "cpu_ms_per_page": 1000 * (sum(last_alive.cpu) - sum(first.cpu)) / pages_all,
                    "seen": seen,
                    "frontier_left": int(client.get(redis_keys.requests_size) or 0),
                    "redis_bytes_per_seen": (end["memory"] - memory_before - items_bytes)
                    / max(1, seen),
                }
        return result

    # --- the phases ------------------------------------------------------------------
    def plain_phase(self, window: int) -> CrawlResult:
        return self.run(
            "plain Scrapy (in-memory scheduler, no Redis)",
            lambda: [self.plain("plain", self.crawl_cpus)],
            window=window,
        )

    def windowed_worker(
        self,
        name: str,
        tag: str,
        window: int,
        *settings: str,
        cwd: Path = ROOT,
        seed: str | None = None,
        workers: int = 1,
    ) -> CrawlResult:
        """The ``worker`` phase's one worker, pinned the same way, stopped after
        ``window`` pages (the jobs, archive, quick and profile runs compare it
        with itself under other ``settings``, or another checkout at ``cwd``).
        ``workers`` > 1 runs that many on the same crawl CPU, so that Redis
        keeps its own CPU and the crawlers' pages/s stay about one worker's:
        what Redis costs a page then differs only by the workers' number
        (issue 42, item 4; ``quick.two_workers_ratio``)."""
        return self.run(
            name,
            lambda: [
                self.worker(
                    tag if workers == 1 else f"{tag}{i}",
                    "MAX_IDLE_TIME_BEFORE_CLOSE=2",
                    f"ITEM_BUFFER_MAX={2 * self.site.pages}",
                    *settings,
                    cpus=self.crawl_cpus,
                    cwd=cwd,
                )
                for i in range(1, workers + 1)
            ],
            window=window,
            seed_key=OURS.start_urls,
            seed=seed,
            redis_keys=OURS,
        )

    def worker_phase(self, window: int, item_buffer_max: int) -> CrawlResult:
        """One worker crawls the whole site: throughput over the window, memory at the end."""
        return self.run(
            "distributed, 1 worker",
            lambda: [
                self.worker(
                    "worker",
                    "MAX_IDLE_TIME_BEFORE_CLOSE=2",
                    f"ITEM_BUFFER_MAX={item_buffer_max}",
                    cpus=self.crawl_cpus,
                )
            ],
            window=window,
            to_the_end=True,
            seed_key=OURS.start_urls,
            redis_keys=OURS,
            timeout=900,
        )

    def wait_phase(self, window: int) -> CrawlResult:
        """One worker as in ``worker_phase``, with a replica of the Redis that
        confirms every write tick (WAIT, REDIS_WAIT_REPLICAS=1): what it costs."""
        replica = RedisServer(
            "--replicaof", "127.0.0.1", str(self.redis.port), cpus=self.service_cpus
        )
        try:
            deadline = time.monotonic() + 30
            while replica.client.info("replication").get("master_link_status") != "up":
                if time.monotonic() > deadline:
                    raise RuntimeError("the replica did not sync")
                time.sleep(0.1)
            return self.run(
                "distributed, 1 worker, WAIT for 1 replica",
                lambda: [
                    self.worker(
                        "worker-wait",
                        "REDIS_WAIT_REPLICAS=1",
                        "MAX_IDLE_TIME_BEFORE_CLOSE=2",
                        cpus=self.crawl_cpus,
                    )
                ],
                window=window,
                seed_key=OURS.start_urls,
                redis_keys=OURS,
            )
        finally:
            replica.stop()

    def two_workers_phase(self, window: int) -> CrawlResult:
        """Two workers; nothing pinned, so they and the site and Redis share both cores."""
        pin(self.site.proc.pid, None)
        pin(self.redis.pid, None)
        pin(self.me.pid, None)
        try:
            return self.run(
                "distributed, 2 workers",
                lambda: [self.worker(f"worker{i}", cpus=None) for i in (1, 2)],
                window=window,
                seed_key=OURS.start_urls,
                redis_keys=OURS,
            )
        finally:
            pin(self.site.proc.pid, self.service_cpus)
            pin(self.redis.pid, self.service_cpus)
            pin(self.me.pid, self.service_cpus)

    def stock_phase(self, window: int) -> CrawlResult:
        return self.run(
            "stock scrapy-redis, 1 worker",
            lambda: [self.stock("stock", self.crawl_cpus)],
            window=window,
            seed_key=STOCK.start_urls,
            redis_keys=STOCK,
        )


def _delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {
        cmd: n - before.get(cmd, 0)
        for cmd, n in after.items()
        if cmd not in OWN_COMMANDS and n > before.get(cmd, 0)
    }


def summary_line(result: CrawlResult) -> str:
    extra = ""
    if result.round_trips_per_page is not None:
        extra = (
            f", {result.commands_per_page:.1f} Redis commands and "
            f"{result.round_trips_per_page:.2f} round trips per page"
        )
    return (
        f"  {result.name}: {result.pages_per_s:,.0f} pages/s over {result.window:,} pages, "
        f"{result.cpu_ms_per_page:.2f} ms CPU per page{extra}"
    )


def describe(result: CrawlResult) -> dict[str, Any]:
    """A plain dict of the result, for the JSON dump next to the logs."""
    d = dict(result.__dict__)
    d["logs"] = [str(p) for p in result.logs]
    d["redis_ceiling"] = result.redis_ceiling
    return d
