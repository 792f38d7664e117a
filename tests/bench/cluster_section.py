"""The Redis Cluster section of docs/BENCHMARKS.md, from the ``cluster`` phase's result."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # cluster.py prints this section when run alone
    from tests.bench.cluster import ClusterResult

# Memory of each master given to the seen-set, for the projection's URL column.
SEEN_GB_PER_MASTER = 10
PROJECTED = (1, 3, 10, 30)


def section(result: ClusterResult) -> list[str]:
    """The section, with the per-master table and the projection."""
    crawl = result.crawl
    lines = [
        "## Redis Cluster: one worker on 3 masters, and a projection",
        "",
        "A Redis Cluster of three masters (`redis-server --cluster-enabled yes`, joined by"
        " `redis-cli --cluster create`, on CPU 1 with the site) and one worker with"
        " `REDIS_CLUSTER=true`; the frontier is in three shards (`FRONTIER_SHARDS` auto)."
        f" The site has {result.hosts} hosts (one port each), 2 in the shard on the spider's"
        " own master and 1 and 3 in the others', crawled from their roots with"
        f" CONCURRENT_REQUESTS_PER_DOMAIN={result.per_host} so that every host has its share"
        " of the worker's 32 requests (`tests/bench/cluster.py`). Its pages/s are in the"
        f" throughput table (*Redis Cluster of 3 masters, 6 hosts*: {crawl.pages_per_s:,.0f};"
        " its own site and per-host concurrency, so not the same crawl as the rows above it)."
        " Below, each master's Redis CPU and commands per page of the window, less the CPU"
        " it spends idle (cluster bus, cron: `INFO`'s CPU over 3 s"
        " before); *Pages* is the share of the crawl's pages whose host is in its shard.",
        "",
        "| Master | Holds | Pages | Redis CPU µs/page | Commands/page | Saturates at |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for i, m in enumerate(result.masters, 1):
        ceiling = f"{1e6 / m.us:,.0f} pages/s" if m.us > 0 else "n/a"
        lines.append(
            f"| {i} | {m.held} | {m.pages:.0%} | {m.us:.1f} | {m.commands:.2f} | {ceiling} |"
        )
    lines.append("")
    for i, m in enumerate(result.masters, 1):
        top = sorted(m.calls.items(), key=lambda kv: -kv[1])[:6]
        lines.append(f"- Master {i}, commands/page: " + ", ".join(f"{k} {n:.2f}" for k, n in top))
    fixed = sorted(result.fixed_calls().items(), key=lambda kv: -kv[1])[:6]
    per_s = crawl.pages_per_s
    lines.append(
        "- Whatever the master's share (*fixed*, below), commands/page: "
        + ", ".join(f"{k} {n:.2f} ({n * per_s:.0f}/s)" for k, n in fixed)
    )
    own = f"{result.own_raw_us:.1f} µs" + (
        " (below zero is noise: taken as 0)" if result.own_raw_us < 0 else ""
    )
    lines += [
        "",
        "A page's items and page-state entries wait in its host's shard, written with its ack"
        " (`frontier/page_shards.py`); `python -m tests.bench.cluster --watch-keys` lists the"
        " keys each master writes. The two masters without the spider's keys give a line,"
        " *µs/page = fixed + slope × share*: the slope is what the frontier costs per page of"
        " a shard, and *fixed* what a master spends per page of the cluster whatever its"
        f" share: {result.fixed_us:.1f} µs (the worker's refill loop visits each shard in turn"
        " until it has what its engine wants, and a shard of a few hosts at"
        f" {result.per_host} requests each gives few leases a visit). The spider's own keys (seeds,"
        f" stats) cost the first master what is above its line: {own}. **Projection**: the"
        f" cluster spends {result.total_us:.0f} µs of Redis CPU per page in all; with N"
        " masters, N shards and hosts spread evenly, each master takes an N-th of what"
        " follows the pages, and the first also the spider's own; the cluster saturates when"
        " that master does. *Fixed* follows the pages where shards hold many hosts each (a"
        " visit then fills the engine's want); where they hold few, every worker visits every"
        " shard, and every master pays it for every page of the cluster: the last column."
        " URLs: the seen-set's bytes per URL measured in the shards' keys"
        f" ({result.seen_bytes_per_url:.1f}), with {SEEN_GB_PER_MASTER} GB of each master given"
        " to it; queued requests cost about 80 bytes each on top while they wait (section"
        " *The frontier's queues*).",
        "",
        "| Masters | Pages/s at saturation | ÷ (N × one master's) | Seen URLs |"
        " *Fixed* on every master: pages/s | ÷ (N × one master's) |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for n in PROJECTED:
        urls = n * SEEN_GB_PER_MASTER * 1e9 / max(result.seen_bytes_per_url, 1e-9)
        lines.append(
            f"| {n} | {result.capacity(n):,.0f} | {result.linearity(n):.2f} | {urls:.2g}"
            f" | {result.capacity(n, True):,.0f} | {result.linearity(n, True):.2f} |"
        )
    return lines
