"""Distance: workers 5 ms each way from Redis, against the same workers on loopback.

This kernel has no netem, so each worker talks to Redis through a TCP delay
relay of its own (``tests/support/relay.py``: every byte 5 ms late each way,
10 ms of round trip; two workers, two relays, as two hosts would be). The
machine's speed drifts by more than the effect looked for, so the two setups
are measured alternately in one run, in pairs (loopback then relay, then
relay then loopback, ...), and each pair gives a ratio relay / loopback; the
report quotes the median of the pairs.

- one worker, pinned like the ``worker`` phase (crawler on CPU 0; the site,
  Redis and the relay on CPU 1);
- two workers, nothing pinned, like the ``two`` phase.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field

from tests.bench.crawls import OURS, Bench, CrawlResult
from tests.support.processes import Proc
from tests.support.relay import Relay
from tests.support.services import pin

DELAY = 0.005  # seconds each way
SETUPS = (1, 2)  # workers


@dataclass
class Pair:
    workers: int
    loopback: CrawlResult
    relay: CrawlResult

    @property
    def ratio(self) -> float:
        return self.relay.pages_per_s / self.loopback.pages_per_s


@dataclass
class DistanceResult:
    window: int
    delay: float = DELAY
    pairs: list[Pair] = field(default_factory=list)

    def of(self, workers: int) -> list[Pair]:
        return [p for p in self.pairs if p.workers == workers]

    def median(self, workers: int) -> float | None:
        ratios = [p.ratio for p in self.of(workers)]
        return statistics.median(ratios) if ratios else None


def distance_phase(
    bench: Bench, window: int, pairs: int, setups: tuple[int, ...] = SETUPS
) -> DistanceResult:
    """``pairs`` pairs of each setup (workers), alternating which of a pair runs first."""
    result = DistanceResult(window=window)
    for i in range(pairs):
        for workers in setups:
            runs: dict[bool, CrawlResult] = {}
            for relayed in (False, True) if i % 2 == 0 else (True, False):
                runs[relayed] = _crawl(bench, workers, relayed=relayed, window=window, n=i)
                print(_line(workers, relayed, runs[relayed]), flush=True)
            result.pairs.append(Pair(workers, runs[False], runs[True]))
    return result


def _line(workers: int, relayed: bool, run: CrawlResult) -> str:
    where = f"{2 * DELAY * 1000:.0f} ms RTT" if relayed else "loopback"
    return (
        f"  {workers} worker(s), {where}: {run.pages_per_s:,.0f} pages/s, "
        f"{run.cpu_ms_per_page:.2f} ms CPU/page, {run.round_trips_per_page:.2f} round trips/page"
    )


def _crawl(bench: Bench, workers: int, *, relayed: bool, window: int, n: int) -> CrawlResult:
    one = workers == 1
    crawl_cpus = bench.crawl_cpus if one else None
    service_cpus = bench.service_cpus if one else None
    relays: list[Relay] = []
    tag = f"{'relay' if relayed else 'loop'}{workers}-{n}"
    if not one:
        for pid in (bench.site.proc.pid, bench.redis.pid, bench.me.pid):
            pin(pid, None)
    try:
        urls = [bench.redis.url] * workers
        if relayed:
            for i in range(workers):
                relay = Relay(
                    ("127.0.0.1", bench.redis.port), DELAY, bench.log_dir, name=f"{tag}-r{i}"
                )
                pin(relay.proc.pid, service_cpus)
                relays.append(relay)
            urls = [f"redis://127.0.0.1:{r.port}/0" for r in relays]
        start = _starter(bench, tag, urls, crawl_cpus)
        where = f"{2 * DELAY * 1000:.0f} ms RTT" if relayed else "loopback"
        return bench.run(
            f"{workers} worker(s), {where}",
            start,
            window=window,
            seed_key=OURS.start_urls,
            redis_keys=OURS,
        )
    finally:
        for relay in relays:
            print(f"    relay {relay.proc.name}: {relay.proc.cpu():.2f} CPU-s", flush=True)
            relay.close()
        if not one:
            for pid in (bench.site.proc.pid, bench.redis.pid, bench.me.pid):
                pin(pid, bench.service_cpus)


def _starter(
    bench: Bench, tag: str, urls: list[str], cpus: set[int] | None
) -> Callable[[], list[Proc]]:
    def start() -> list[Proc]:
        saved = bench.env
        procs = []
        try:
            for i, url in enumerate(urls):
                bench.env = {**saved, "REDIS_URL": url}
                procs.append(bench.worker(f"{tag}-w{i}", "MAX_IDLE_TIME_BEFORE_CLOSE=2", cpus=cpus))
        finally:
            bench.env = saved
        return procs

    return start


def section(result: DistanceResult) -> list[str]:
    """The section of docs/BENCHMARKS.md."""
    rtt = f"{2 * result.delay * 1000:.0f} ms RTT"
    out = [
        "## Distance: workers 5 ms each way from Redis",
        "",
        f"Each worker reaches Redis through a TCP delay relay of its own "
        f"(`tests/support/relay.py`, {result.delay * 1000:.0f} ms each way, {rtt}; two workers, "
        f"two relays), against the same setup on loopback, alternately in one run "
        f"(`tests/bench/distance.py`); {result.window:,}-page windows of the same site; "
        "one worker pinned as in the throughput table, two workers unpinned. "
        "*× loopback* is relay / loopback pages/s per pair; the target row is the median.",
        "",
        "| Setup | Pairs | × loopback, median | each pair | Loopback pages/s | Relay pages/s "
        "| Round trips/page (loopback / relay) |",
        "|---|---:|---:|---|---|---|---|",
    ]
    for workers in SETUPS:
        pairs = result.of(workers)
        if not pairs:
            continue
        median = result.median(workers)
        out.append(
            f"| {rtt}, {workers} worker{'s' if workers > 1 else ''} | {len(pairs)} "
            f"| {median:.2f}× | {', '.join(f'{p.ratio:.2f}' for p in pairs)} "
            f"| {', '.join(f'{p.loopback.pages_per_s:,.0f}' for p in pairs)} "
            f"| {', '.join(f'{p.relay.pages_per_s:,.0f}' for p in pairs)} "
            f"| {', '.join(_trips(p) for p in pairs)} |"
        )
    return out


def _trips(pair: Pair) -> str:
    a, b = pair.loopback.round_trips_per_page, pair.relay.round_trips_per_page
    return f"{a or 0:.2f} / {b or 0:.2f}"
