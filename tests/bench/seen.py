"""The seen-set's phase of ``make bench``: Redis memory and CPU per seen URL.

For each size, a fresh Redis records that many fingerprints (SHA1s, as
Scrapy's fingerprinter gives) in each layout, through the scripts workers run
(``lua/seen_add.lua``; the previous release's SADD of 40-hex strings for the
"before" line), in batches of 5,000. Memory is the growth of INFO
``used_memory`` (read on a new connection, so the query buffer of the one
that sent the batches does not count); CPU is Redis' user+sys CPU over the
inserts, per URL. Bloom is sized for exactly that many URLs
(``DUPEFILTER_CAPACITY``) at 1e-7, crawlee's default; "timed" is exact mode
with the time of each URL's last enqueue (``RECRAWL_AFTER`` set).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import redis

from spiders_project.frontier.calls import seen_add_call
from spiders_project.frontier.scripts import FrontierScripts
from spiders_project.frontier.seen import EXACT, SeenConfig
from spiders_project.keys import RedisKeys
from tests.bench.beside import BESIDE
from tests.support.services import RedisServer

BATCH = 5000
KEYS = RedisKeys("bench")
# Exact mode with times, as RECRAWL_AFTER=86400 (a day) keeps them.
TIMED = SeenConfig("exact", 1, 0.5, recrawl_after=86_400)


@dataclass
class SeenResult:
    layout: str
    urls: int
    bytes_per_url: float
    redis_cpu_us_per_url: float
    keys: int
    key_bytes_per_url: float = 0.0  # MEMORY USAGE of the set's own keys, per URL


def redis_cpu(client: redis.Redis) -> float:
    """Redis' own CPU seconds so far (``INFO cpu``, user + system)."""
    info = client.info("cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


def _measure(server: RedisServer, layout: str, n: int) -> SeenResult:
    server.reset()
    client = server.client
    fingerprints = (hashlib.sha1(f"url {i}".encode()).digest() for i in range(n))
    before = int(client.info("memory")["used_memory"])
    cpu = redis_cpu(client)
    script = FrontierScripts().seen_add
    sha = client.script_load(script.source)
    config = {"bloom": SeenConfig("bloom", n, 1e-7), "timed (RECRAWL_AFTER)": TIMED}.get(
        layout, EXACT
    )
    batch: list[bytes] = []
    for fingerprint in fingerprints:
        batch.append(fingerprint)
        if len(batch) == BATCH:
            _send(client, layout, config, sha, batch)
            batch = []
    if batch:
        _send(client, layout, config, sha, batch)
    cpu = redis_cpu(client) - cpu
    # Drop the connection that sent the large calls: its query buffer is not the set's.
    client.connection_pool.disconnect()
    used = int(client.info("memory")["used_memory"]) - before
    own = sum(int(client.memory_usage(k, samples=0) or 0) for k in client.scan_iter(count=10_000))
    return SeenResult(layout, n, used / n, cpu / n * 1e6, int(client.dbsize()), own / n)


def _send(client: redis.Redis, layout: str, config: SeenConfig, sha: str, batch: list[bytes]):
    if layout == "hex set (before)":
        client.sadd(KEYS.dupefilter, *(f.hex() for f in batch))
        return
    keys, args = seen_add_call(KEYS, config.spec, [config.token(f) for f in batch])
    client.evalsha(sha, len(keys), *keys, *args)


def seen_phase(
    server: RedisServer, sizes: tuple[int, ...] = (100_000, 1_000_000)
) -> list[SeenResult]:
    results = []
    for n in sizes:
        for layout in ("hex set (before)", "exact", "timed (RECRAWL_AFTER)", "bloom"):
            result = _measure(server, layout, n)
            print(
                f"  {layout}, {n:,} URLs: {result.bytes_per_url:.1f} bytes/URL "
                f"({result.key_bytes_per_url:.1f} in its keys), "
                f"{result.redis_cpu_us_per_url:.2f} Redis CPU us/URL",
                flush=True,
            )
            results.append(result)
    server.reset()
    return results


def section(results: list[SeenResult], beside: bool) -> list[str]:
    """The seen-set's section of docs/BENCHMARKS.md (``beside``: the phase ran beside freshness)."""
    lines = [
        "## The seen-set: Redis memory and CPU per seen URL",
        "",
        "A fresh redis-server records N fingerprints (SHA1s, as Scrapy's fingerprinter"
        " gives) through the script workers run (`lua/seen_add.lua`), 5,000 per call; the"
        " previous release's layout is scrapy-redis' SADD of 40-hex strings. *Bytes/URL*"
        " is the growth of `used_memory` over N; *Redis CPU* its user+sys CPU over the"
        " inserts; *In its keys* the sum of `MEMORY USAGE` (SAMPLES 0) of the set's own keys"
        " over N, without the fixed costs `used_memory` also grows by (Lua, the key table)."
        " Bloom is sized for exactly N URLs at an error rate of 1e-7; *timed* is `exact` with"
        " the time of each URL's last enqueue (`RECRAWL_AFTER` set)." + (BESIDE if beside else ""),
        "",
        "| Layout | URLs | Bytes/URL | In its keys | Redis CPU µs/URL | Keys |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {s.layout} | {s.urls:,} | {s.bytes_per_url:.1f} | {s.key_bytes_per_url:.1f}"
        f" | {s.redis_cpu_us_per_url:.2f} | {s.keys:,} |"
        for s in results
    ]
    return lines
