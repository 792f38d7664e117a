"""The ``cluster`` phase: one worker on a Redis Cluster of three masters, over several hosts.

    python -m tests.bench.cluster [--window 3000] [--pages 15000] [--watch-keys]

The same worker as the ``worker`` phase, with ``REDIS_CLUSTER=true`` and the
frontier in three shards (``FRONTIER_SHARDS`` auto: one per master), until
``--window`` pages. Its site has 6 hosts (a site of its own, one port per
host, ``--pages`` pages in all), ``HOSTS`` of them in each shard, so every
master carries frontier work, as hosts spread over the shards of a real crawl;
with one host (before issue 42) one master did all of it, and the spider's own
keys could not be told from an idle shard's cost.

Besides pages/s (against one Redis, in the same run), it measures what each
master spends per page of the window: the master of the spider's own slot (seeds,
stats, and a shard) and the two others (a shard each). A page's items and
page-state entries go to its host's shard, with its ack. From those, the
projection of docs/BENCHMARKS.md: the pages/s at which the busiest master of an
N-master cluster would be saturated, if the frontier is split in N shards and
hosts spread evenly over them.

``--watch-keys`` (standalone only: it costs Redis CPU) then crawls again with
keyspace notifications on and prints, per master, the writes per page by key
(``cluster_keys.py``): what shows which keys a page writes outside its shard.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spiders_project.crawl.hosts import host_of
from spiders_project.keys import RedisKeys
from tests.bench.cluster_keys import watched_crawl
from tests.bench.cluster_section import section
from tests.bench.crawls import OWN_COMMANDS, Bench, CrawlResult, pin_apart
from tests.bench.site_proc import Site
from tests.support.services import RedisClusterGroup, RedisServer, pin

CLUSTER = RedisKeys("distributed", cluster=True, shards=3)
IDLE_SECONDS = 3.0
# Hosts in the shard of the spider's own master, then of the two others: their shares of
# the pages differ (about 2/6, 1/6, 3/6), so that what a master spends per page of its
# shard and what it spends whatever its share can be told apart (ClusterResult._fit).
HOSTS = (2, 1, 3)
# Ports the site draws; HOSTS of the shards' are crawled. With 18, a shard has fewer
# than it needs about once in 25 draws (then the site is started again).
DRAWN_HOSTS = 18
# Requests at once per host: CONCURRENT_REQUESTS (32) over the 6 hosts, so that every host
# has its share of them. At 16, as elsewhere, two hosts took every slot and one shard up
# to 86% of the pages (runs of 2026-12-08).
PER_HOST = 5


class ClusterRedis:
    """A cluster's masters seen as the benchmark's one Redis (``Bench.redis``):
    reset, samples and CPU summed over them. It keeps each master's sample of each
    ``sample()`` (``marks``): ``Bench.run`` takes one before the crawl, one at its
    first page and one when its window closes."""

    def __init__(self, group: RedisClusterGroup, site: Site) -> None:
        self.group = group
        self.url = group.url
        self.client = group.client
        self.masters = group.masters()
        self.site = site
        self.marks: list[Mark] = []

    def reset(self) -> None:
        for node in self.masters:
            node.reset()
        self.marks.clear()

    def cpu(self) -> float:
        return sum(node.cpu() for node in self.masters)

    def sample(self) -> dict[str, Any]:
        mark = Mark(time.monotonic(), self.site.count(), [node.sample() for node in self.masters])
        self.marks.append(mark)
        calls: dict[str, int] = {}
        for one in mark.nodes:
            for name, n in one["calls"].items():
                calls[name] = calls.get(name, 0) + n
        cpu = sum(one["cpu"] for one in mark.nodes)
        return {"calls": calls, "cpu": cpu, "memory": sum(one["memory"] for one in mark.nodes)}


@dataclass
class Mark:
    t: float
    pages: int
    nodes: list[dict[str, Any]]


@dataclass
class Master:
    held: str  # what it holds: "spider's keys + shard 1", "shard 0"
    us: float  # Redis CPU per page of the window, idle CPU taken off
    calls: dict[str, float]  # commands per page of the window, by name
    pages: float  # the share of the crawl's pages whose host is in its shard(s)

    @property
    def commands(self) -> float:
        return sum(self.calls.values())


@dataclass
class ClusterResult:
    crawl: CrawlResult
    masters: list[Master]  # the spider's own master first
    seen_bytes_per_url: float
    hosts: int = 0
    pages_by_shard: dict[int, int] = field(default_factory=dict)
    per_host: int = PER_HOST  # CONCURRENT_REQUESTS_PER_DOMAIN of the crawl

    @property
    def total_us(self) -> float:
        """Redis CPU per page of the whole cluster (what one Redis would spend)."""
        return sum(m.us for m in self.masters)

    def _fit(self) -> tuple[float, float]:
        """(µs per page of a shard's own pages, µs per page every master spends
        whatever its share) from the two masters without the spider's keys:
        ``us = fixed + slope * pages``. With shares too close to fit (under 0.1
        apart), the slope is the cluster's whole cost per page (a master with all
        pages would carry it)."""
        a, b = self.masters[1:3]
        if abs(a.pages - b.pages) >= 0.1:
            slope = (a.us - b.us) / (a.pages - b.pages)
        else:
            slope = self.total_us
        mean_us, mean_pages = (a.us + b.us) / 2, (a.pages + b.pages) / 2
        return slope, max(0.0, mean_us - slope * mean_pages)

    def fixed_calls(self) -> dict[str, float]:
        """The commands of ``fixed_us``: each command's calls per page of the cluster on a
        master whatever its share, fitted as ``_fit`` fits the CPU."""
        a, b = self.masters[1:3]
        out = {}
        for name in set(a.calls) | set(b.calls):
            x, y = a.calls.get(name, 0.0), b.calls.get(name, 0.0)
            slope = (x - y) / (a.pages - b.pages) if abs(a.pages - b.pages) >= 0.1 else 0.0
            out[name] = max(0.0, (x + y) / 2 - slope * (a.pages + b.pages) / 2)
        return out

    @property
    def fixed_us(self) -> float:
        """What every master spends per page of the cluster whatever its share of the
        pages: the worker's visits to every shard (its refill loop takes from each
        shard in turn until it has what the engine wants: a shard of few hosts
        gives few leases a visit), per page it crawls."""
        return self._fit()[1]

    @property
    def own_raw_us(self) -> float:
        """What the spider's own keys cost per page, measured: the first master's CPU
        beyond what a master with its share of the pages spends (``_fit``)."""
        slope, fixed = self._fit()
        return self.masters[0].us - fixed - slope * self.masters[0].pages

    @property
    def own_us(self) -> float:
        return max(0.0, self.own_raw_us)

    @property
    def frontier_us(self) -> float:
        """The cluster's cost per page that follows its pages' shards."""
        return max(0.0, self.total_us - self.own_us - len(self.masters) * self.fixed_us)

    def capacity(self, masters: int, fixed_stays: bool = False) -> float:
        """Pages/s at which the busiest of ``masters`` masters saturates one core.

        The frontier's share of the cluster's CPU per page spreads over N
        shards on N masters when hosts spread evenly over them; the spider's
        own keys stay on one master, which is then the busiest. ``fixed_us``
        spreads with the frontier (as before issue 42: a worker's visits to a
        shard follow the pages it leases there), or with ``fixed_stays`` is
        paid by every master for every page of the cluster (each worker visits
        every shard on every refill, as with this run's few hosts a shard).
        """
        if fixed_stays:
            return 1e6 / (self.frontier_us / masters + self.fixed_us + self.own_us)
        spread = self.frontier_us + len(self.masters) * self.fixed_us
        return 1e6 / (spread / masters + self.own_us)

    def linearity(self, masters: int, fixed_stays: bool = False) -> float:
        """Pages/s of ``masters`` masters over ``masters`` times one master's."""
        one = self.capacity(1, fixed_stays)
        return self.capacity(masters, fixed_stays) / (masters * one)


def hosts_site(
    pages: int, log_dir: Path, cpus: set[int] | None, hosts: list[int]
) -> tuple[Site, list[str]]:
    """A site of ``pages`` pages over ``hosts[n]`` hosts in shard ``n``, and their roots
    (the seeds), in shard order."""
    for _ in range(5):
        site = Site(pages // sum(hosts), log_dir, cpus, hosts=DRAWN_HOSTS)
        by_shard: dict[int, list[str]] = {}
        for url in site.urls:
            by_shard.setdefault(CLUSTER.shard_of(host_of(url)), []).append(url)
        chosen = [by_shard.get(n, [])[:want] for n, want in enumerate(hosts)]
        if all(len(urls) == want for urls, want in zip(chosen, hosts, strict=True)):
            return site, [url for urls in chosen for url in urls]
        site.stop()
    raise RuntimeError(f"not {hosts} hosts in the shards in 5 draws of ports")


def cluster_phase(
    bench: Bench, window: int, pages: int, watch: Callable[[ClusterResult], None] | None = None
) -> ClusterResult:
    """One worker on a 3-master cluster, until ``window`` pages of a site of ``pages``
    pages over several hosts (``bench`` gives the CPUs, log directory and settings).
    ``watch``: given the result, then the crawl again with its writes counted
    (``cluster_keys.py``)."""
    log_dir = bench.log_dir / "cluster"
    log_dir.mkdir(parents=True, exist_ok=True)
    group = RedisClusterGroup(masters=3)
    site: Site | None = None
    try:
        for node in group.nodes:
            pin(node.pid, bench.service_cpus)
        home = group.master_of(CLUSTER.prefix)
        others = sorted(m.port for m in group.masters() if m.port != home.port)
        # HOSTS of the shards on the spider's own master, then on the others in port order.
        counts = dict(zip([home.port, *others], HOSTS, strict=True))
        hosts = [counts[group.master_of(s.frontier_prefix).port] for s in CLUSTER.all_shards]
        site, seeds = hosts_site(pages, log_dir, bench.service_cpus, hosts)
        cluster = ClusterRedis(group, site)
        on = Bench(site, cluster, log_dir, bench.crawl_cpus, bench.service_cpus, bench.settings)  # type: ignore[arg-type]  # the same methods
        on.env = {**bench.env, "REDIS_CLUSTER": "true"}
        order = [home] + sorted(
            (m for m in cluster.masters if m.port != home.port), key=lambda m: m.port
        )
        index = [next(i for i, m in enumerate(cluster.masters) if m.port == n.port) for n in order]
        idle = _idle_rates(order)
        crawl = on.run(
            "distributed, 1 worker, Redis Cluster of 3 masters, 6 hosts",
            lambda: [
                on.worker(
                    "worker-cluster",
                    "MAX_IDLE_TIME_BEFORE_CLOSE=2",
                    f"CONCURRENT_REQUESTS_PER_DOMAIN={PER_HOST}",
                    cpus=bench.crawl_cpus,
                )
            ],
            window=window,
            seed_key=CLUSTER.start_urls,
            seed=seeds,
        )
        by_host = site.pages_by_host()
        by_shard: dict[int, int] = {}
        for host, n in by_host.items():
            shard = CLUSTER.shard_of(host)
            by_shard[shard] = by_shard.get(shard, 0) + n
        first, win = cluster.marks[1], cluster.marks[2]
        served = max(1, win.pages - first.pages)
        masters = []
        for i, (node, j, rate) in enumerate(zip(order, index, idle, strict=True)):
            shards = [
                k
                for k, shard in enumerate(CLUSTER.all_shards)
                if group.master_of(shard.frontier_prefix).port == node.port
            ]
            held = ("spider's keys + " if i == 0 else "") + "shard " + ",".join(map(str, shards))
            a, b = first.nodes[j], win.nodes[j]
            busy = max(0.0, b["cpu"] - a["cpu"] - rate * (win.t - first.t))
            calls = {k: n - a["calls"].get(k, 0) for k, n in b["calls"].items()}
            calls = {k: n / served for k, n in calls.items() if n and k not in OWN_COMMANDS}
            share = sum(by_shard.get(k, 0) for k in shards) / max(1, sum(by_shard.values()))
            masters.append(Master(held, 1e6 * busy / served, calls, share))
        crawl.redis_cpu_per_10k = sum(m.us for m in masters) / 100
        crawl.commands_per_page = sum(m.commands for m in masters)
        result = ClusterResult(crawl, masters, _seen_bytes(group), len(seeds), by_shard)
        if watch is not None:
            watch(result)
            watched_crawl(on, CLUSTER, order, window, seeds)
        return result
    finally:
        group.stop()
        if site is not None:
            site.stop()


def _idle_rates(nodes: list[RedisServer]) -> list[float]:
    """CPU seconds per second each node spends with no client (cron, cluster bus), from
    ``INFO``'s CPU as the window's figures (psutil's, in clock ticks, read 0)."""
    before = [node.sample()["cpu"] for node in nodes]
    time.sleep(IDLE_SECONDS)
    after = [node.sample()["cpu"] for node in nodes]
    return [(a - b) / IDLE_SECONDS for a, b in zip(after, before, strict=True)]


def _seen_bytes(group: RedisClusterGroup) -> float:
    """Bytes per seen URL in the shards' seen-set keys (MEMORY USAGE)."""
    usage = seen = 0
    for shard in CLUSTER.all_shards:
        node = group.master_of(shard.frontier_prefix)
        seen += int(node.client.get(shard.seen) or 0)
        for key in node.client.scan_iter(match=shard.seen_parts, count=1000):
            usage += int(node.client.memory_usage(key, samples=0) or 0)
    return usage / max(1, seen)


def main(argv: list[str] | None = None) -> int:
    """The cluster phase alone (its section printed, docs untouched)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--window", type=int, default=3_000)
    parser.add_argument("--pages", type=int, default=15_000, help="pages of the site, all hosts")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--watch-keys", action="store_true", help="then a crawl watching writes")
    parser.add_argument("--log-dir", type=Path, default=Path("/tmp/bench-cluster"))
    args = parser.parse_args(argv)

    def show(result: ClusterResult) -> None:
        print("\n".join(section(result)), flush=True)

    args.log_dir.mkdir(parents=True, exist_ok=True)
    crawl_cpus, service_cpus = pin_apart()
    # The phase brings its own site and Redis: the Bench gives CPUs, logs and settings.
    bench = Bench(None, None, args.log_dir, crawl_cpus, service_cpus)  # type: ignore[arg-type]
    for n in range(args.rounds):
        last = args.watch_keys and n == args.rounds - 1
        result = cluster_phase(bench, args.window, args.pages, show if last else None)
        if not last:
            show(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
