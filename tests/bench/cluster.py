"""The ``cluster`` phase: one worker on a Redis Cluster of three masters.

The same worker and site as the ``worker`` phase, with ``REDIS_CLUSTER=true``
and the frontier in three shards (``FRONTIER_SHARDS`` auto: one per master),
until ``--window`` pages. Besides pages/s (against one Redis, in the same
run), it measures what each master spends per page: the master of the
spider's own slot (seeds, stats, and one shard) and the two others (a
shard each); a page's items are buffered in its host's shard. From those,
the projection of docs/BENCHMARKS.md: the pages/s at which the busiest
master of an N-master cluster would be saturated, if the frontier is split
in N shards and hosts spread evenly over them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from spiders_project.keys import RedisKeys
from tests.bench.crawls import Bench, CrawlResult
from tests.support.services import RedisClusterGroup, RedisServer, pin

CLUSTER = RedisKeys("distributed", cluster=True, shards=3)
IDLE_SECONDS = 3.0


class ClusterRedis:
    """A cluster's masters seen as the benchmark's one Redis (``Bench.redis``):
    reset, samples and CPU summed over them."""

    def __init__(self, group: RedisClusterGroup) -> None:
        self.group = group
        self.url = group.url
        self.client = group.client
        self.masters = group.masters()

    def reset(self) -> None:
        for node in self.masters:
            node.reset()

    def cpu(self) -> float:
        return sum(node.cpu() for node in self.masters)

    def sample(self) -> dict[str, Any]:
        calls: dict[str, int] = {}
        cpu = memory = 0.0
        for node in self.masters:
            one = node.sample()
            for name, n in one["calls"].items():
                calls[name] = calls.get(name, 0) + n
            cpu += one["cpu"]
            memory += one["memory"]
        return {"calls": calls, "cpu": cpu, "memory": int(memory)}


@dataclass
class ClusterResult:
    crawl: CrawlResult
    # Per master: (what it holds, Redis CPU us per page over the window).
    masters: list[tuple[str, float]]
    seen_bytes_per_url: float

    @property
    def total_us(self) -> float:
        """Redis CPU per page of the whole cluster (what one Redis would spend)."""
        return sum(us for _, us in self.masters)

    @property
    def own_us(self) -> float:
        """What the spider's own keys (seeds, stats; no page's items) cost per page:
        the first master's CPU beyond the least busy other master's, which holds
        a shard too."""
        return max(0.0, self.masters[0][1] - min(us for _, us in self.masters[1:]))

    def capacity(self, masters: int) -> float:
        """Pages/s at which the busiest of ``masters`` masters saturates one core.

        The frontier's share of the cluster's CPU per page spreads over N
        shards on N masters when hosts spread evenly over them; the spider's
        own keys stay on one master, which is then the busiest.
        """
        frontier = self.total_us - self.own_us
        return 1e6 / (frontier / masters + self.own_us)


def cluster_phase(bench: Bench, window: int) -> ClusterResult:
    """One worker on a 3-master cluster, until ``window`` pages."""
    group = RedisClusterGroup(masters=3)
    original = bench.redis
    try:
        for node in group.nodes:
            pin(node.pid, bench.service_cpus)
        cluster = ClusterRedis(group)
        home = group.master_of(CLUSTER.prefix)
        order = [home] + [m for m in cluster.masters if m.port != home.port]
        bench.redis = cluster  # type: ignore[assignment]  # the same three methods
        bench.env["REDIS_CLUSTER"] = "true"
        idle = _idle_rates(order)
        before = [node.cpu() for node in order]
        started = time.monotonic()
        crawl = bench.run(
            "distributed, 1 worker, Redis Cluster of 3 masters",
            lambda: [
                bench.worker(
                    "worker-cluster", "MAX_IDLE_TIME_BEFORE_CLOSE=2", cpus=bench.crawl_cpus
                )
            ],
            window=window,
            seed_key=CLUSTER.start_urls,
        )
        spent = time.monotonic() - started
        pages = max(1, crawl.pages_total)
        masters = []
        for i, (node, first, rate) in enumerate(zip(order, before, idle, strict=True)):
            shards = [
                str(k)
                for k, shard in enumerate(CLUSTER.all_shards)
                if group.master_of(shard.frontier_prefix).port == node.port
            ]
            held = ("spider's keys + " if i == 0 else "") + "shard " + ",".join(shards)
            busy = max(0.0, node.cpu() - first - rate * spent)
            masters.append((held, 1e6 * busy / pages))
        return ClusterResult(crawl, masters, _seen_bytes(group))
    finally:
        bench.redis = original
        bench.env.pop("REDIS_CLUSTER", None)
        group.stop()


def _idle_rates(nodes: list[RedisServer]) -> list[float]:
    """CPU seconds per second each node spends with no client (cron, cluster bus)."""
    before = [node.cpu() for node in nodes]
    time.sleep(IDLE_SECONDS)
    return [(node.cpu() - b) / IDLE_SECONDS for node, b in zip(nodes, before, strict=True)]


def _seen_bytes(group: RedisClusterGroup) -> float:
    """Bytes per seen URL in the shards' seen-set keys (MEMORY USAGE)."""
    usage = seen = 0
    for shard in CLUSTER.all_shards:
        node = group.master_of(shard.frontier_prefix)
        seen += int(node.client.get(shard.seen) or 0)
        for key in node.client.scan_iter(match=shard.seen_parts, count=1000):
            usage += int(node.client.memory_usage(key, samples=0) or 0)
    return usage / max(1, seen)


# Memory of each master given to the seen-set, for the projection's URL column.
SEEN_GB_PER_MASTER = 10


def section(result: ClusterResult) -> list[str]:
    """The Redis Cluster section of docs/BENCHMARKS.md, with its projection."""
    lines = [
        "## Redis Cluster: one worker on 3 masters, and a projection",
        "",
        "A Redis Cluster of three masters (`redis-server --cluster-enabled yes`, joined by"
        " `redis-cli --cluster create`, on CPU 1 with the site) and one worker with"
        " `REDIS_CLUSTER=true`; the frontier is in three shards (`FRONTIER_SHARDS` auto), and"
        " the site's one host, so all its requests, in one of them (`tests/bench/cluster.py`)."
        " Its pages/s are in the throughput table (*Redis Cluster of 3 masters*), against one"
        " Redis in the same run. Below, each master's Redis CPU per page over the crawl, less"
        " what it spends idle (cluster bus, cron), measured for"
        " 3 s before.",
        "",
        "| Master | Holds | Redis CPU µs/page | Saturates at |",
        "|---|---|---:|---:|",
    ]
    for i, (held, us) in enumerate(result.masters, 1):
        ceiling = f"{1e6 / us:,.0f} pages/s" if us > 0 else "n/a"
        lines.append(f"| {i} | {held} | {us:.1f} | {ceiling} |")
    lines += [
        "",
        "The site has one host, so one shard (one master) does all of the frontier's work per"
        " page; the others show what an idle shard costs (the worker's lease calls visit every"
        " shard) and what the spider's own keys cost (seeds, stats; a page's items are in its"
        " host's shard, with its ack: the first master"
        " beyond the least busy other one). **Projection**: the cluster spends"
        f" {result.total_us:.0f} µs of Redis CPU per page in all (one Redis, above: its"
        " *Redis CPU s/10k pages*); with N masters, N shards and hosts spread evenly, each"
        " master takes an N-th of the frontier's share, and the first also the spider's own"
        f" ({result.own_us:.1f} µs); the cluster saturates when that master does. URLs: the"
        f" seen-set's bytes per URL measured in the shards' keys ({result.seen_bytes_per_url:.1f}),"
        f" with {SEEN_GB_PER_MASTER} GB of each master given to it; queued requests cost about"
        " 80 bytes each on top while they wait (section *The frontier's queues*).",
        "",
        "| Masters | Pages/s at saturation | Seen URLs |",
        "|---:|---:|---:|",
    ]
    for n in (1, 3, 10, 30):
        urls = n * SEEN_GB_PER_MASTER * 1e9 / max(result.seen_bytes_per_url, 1e-9)
        lines.append(f"| {n} | {result.capacity(n):,.0f} | {urls:.2g} |")
    return lines
