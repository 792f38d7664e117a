"""The *How it is measured* section of docs/BENCHMARKS.md: what each column of the
throughput table counts, and where the raw results are."""

from __future__ import annotations


def method(command: str) -> list[str]:
    return [
        "## How it is measured",
        "",
        "- **Pages/s**: from the site's own arrival times of the window's first and last "
        "page (one clock for every process of the machine).",
        "- **Worker CPU**: user+system seconds of the crawler process(es) (psutil, sampled "
        "every 0.2 s) between the first page and the end of the window, per page served.",
        "- **Redis commands/page**: `INFO commandstats` delta of the private redis-server over "
        "the same interval, every command counted, including those a Lua script or a "
        "MULTI/EXEC runs (the benchmark's own INFO excluded).",
        "- **Round trips/page**: the worker's stat `redis/round_trips` (every request/reply "
        "exchange with Redis: a MULTI/EXEC of the write batcher, a lease script, a seed "
        "read, ...) over its `item_scraped_count`, whole run, as it publishes them to Redis; "
        "for stock scrapy-redis the same count is taken by wrapping redis-py (one per "
        "command, one per pipeline), and it and plain Scrapy leave their final stats in a file.",
        "- **Redis CPU**: `INFO cpu` used_cpu_sys+used_cpu_user delta; *One Redis saturates "
        "at* = 10,000 / (Redis CPU s per 10k pages), the pages/s at which one Redis core "
        "would be fully busy with this load.",
        "- **Site CPU**: the site process's CPU over the window, as a share of one core; "
        "**Other load**: the machine's busy CPU time minus that of the benchmark's own "
        "processes, in cores (anything above 0.1 means the figures are disturbed).",
        "- **Memory**: the worker's RSS when the site served its first page and at the last "
        "sample before it exited (the crawl then is complete); Redis memory per seen URL is "
        "the growth of `used_memory` minus `MEMORY USAGE` of the item buffer, per fingerprint.",
        "- Plain Scrapy keeps Scrapy's default order (LIFO, depth-first); the frontier is "
        "FIFO within a priority (breadth-first); stock scrapy-redis orders by priority and "
        "then by pickle bytes. A window of a larger site keeps every setup in the middle of "
        "a crawl. Plain Scrapy JSON-encodes each item like the worker's pipeline, then "
        "drops it.",
        f"- Raw results: `{command}` writes `results.json` and every process's log to "
        "its log directory.",
    ]
