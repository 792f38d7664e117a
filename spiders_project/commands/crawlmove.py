"""``scrapy crawlmove --from URL``: copy a stopped crawl from one Redis into the settings' Redis.

Moving from one Redis to a Redis Cluster changes every key's name (hash
tags) and splits the frontier by host (``shards.py``), so the keys cannot
simply be replicated across. This command reads the crawl the source holds
(``--from``, the old single Redis) and writes it where the settings point
(``REDIS_URL``, with ``REDIS_CLUSTER`` and ``FRONTIER_SHARDS`` as the
workers will run)::

    scrapy crawlmove --from redis://old-redis:6379/0 [--spider NAME] [--overwrite]

What goes where:

- each host's queue, list, jobs set and waiting retries, its ready-set entry and its
  Crawl-delay go to its host's shard, as they were (DUMP/RESTORE: order,
  priorities and retry times kept); each shard's request counter is the sum
  of what it received, and its sequence counter the source's, so requests
  queued later still come after;
- the seen-set (buckets, counter, mode; the previous release's hex set
  too) goes to *every* shard: its fingerprints carry no host to split them
  by, and a URL is looked up in its host's shard only. Each master then holds
  what the single Redis held for the URLs seen so far; new URLs spread over
  the shards (docs/SCALING.md, "Migrating a running crawl");
- the spider's own keys (seeds, rejected seeds, buffered items, dead
  letters, per-seed page budgets, stats, proxy bans) keep their names, with
  the cluster's hash tag.

Not copied: leases and what belongs to them (cap slots, turns), which must be
empty (stop the source's workers: SIGTERM hands their leases back), robots.txt
copies and locks (fetched again), and the workers' heartbeats and the
db_writers' leases (a batch a db_writer left in its processing list is taken
over by a writer on the target).

The source is read only and left as it was. The command refuses a target
that already holds a crawl of the spider unless ``--overwrite``, which
replaces every key it writes; so a move cut short can be run again whole.
"""

from __future__ import annotations

import argparse
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import redis
from scrapy.commands import ScrapyCommand

from spiders_project.commands.redis_command import RedisCommand, redis_error
from spiders_project.keys import SPIDERS, RedisKeys
from spiders_project.keys.jobs import host_jobs, job_turns
from spiders_project.redis_access.connection import sync_client
from spiders_project.redis_access.shards import spider_keys

# Keys read and written per round trip.
BATCH = 500

# Per-host frontier keys (suffix after the spider's prefix, then the host).
_HOST_KEYS = {
    "requests:host:": RedisKeys.host_queue,
    "requests:list:": RedisKeys.host_list,
    "requests:later:": RedisKeys.host_later,
    "requests:jobs:": host_jobs,
}
# Leases and what lives only while a request is leased: must be empty or are transient.
_LEASE_STATE = (
    "requests:leases",
    "requests:lease_info",
    "requests:in_flight",
    "requests:released",
    "requests:cap_waiters",
    "requests:cap_handover",
)
# Not moved: fetched or rebuilt by the processes of the target.
_NOT_MOVED_PREFIXES = ("requests:turn:", "robots:", "worker:", "db_writer:lease:")
_NOT_MOVED = {"workers", "db_writer:lock", "frontier:shards", "seeds:taken"}


class MoveRefused(Exception):
    """The move cannot start; the message says why, in one line."""


@dataclass
class Moved:
    """What the move wrote, for its summary line."""

    hosts: set[str] = field(default_factory=set)
    job_hosts: set[str] = field(default_factory=set)  # hosts with a jobs set: their turns
    requests: Counter[int] = field(default_factory=Counter)  # shard -> requests
    seen_keys: int = 0
    spider_keys: int = 0
    skipped: Counter[str] = field(default_factory=Counter)


class Command(RedisCommand, ScrapyCommand):
    """Operator's move of a crawl between Redis deployments; never starts a crawl."""

    takes_arguments = False

    def syntax(self) -> str:
        return "--from REDIS_URL [--spider NAME] [--overwrite]"

    def short_desc(self) -> str:
        return "Copy a stopped crawl from another Redis into this one (e.g. onto a Redis Cluster)"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument(
            "--from", dest="source", required=True, help="redis:// URL of the crawl's current Redis"
        )
        self.add_spider_option(parser)
        parser.add_argument(
            "--overwrite",
            action="store_true",
            help="replace what the target holds of this spider's crawl",
        )

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        assert self.settings is not None
        seeds = self.seeds_key(opts.spider)
        with self.config_errors():
            target_keys = spider_keys(self.settings, opts.spider, seeds)
            target = sync_client(self.settings)
        # The operator's user may run what the move writes (RESTORE among them).
        self.check_user()
        source = redis.Redis.from_url(opts.source)
        source_keys = RedisKeys(opts.spider, seeds)
        try:
            move = CrawlMove(source, source_keys, target, target_keys)
            move.check(overwrite=opts.overwrite)
            moved = move.run()
        except MoveRefused as exc:
            self.fail(str(exc))
            return
        except (redis.RedisError, redis.exceptions.RedisClusterException) as exc:
            self.fail(f"{redis_error(exc)} (nothing is lost: run it again)")
            return
        finally:
            source.close()
            target.close()
        per_shard = "/".join(str(moved.requests[i]) for i in range(len(target_keys.all_shards)))
        print(
            f"Moved the crawl of {opts.spider}: {sum(moved.requests.values())} queued requests "
            f"of {len(moved.hosts)} hosts into {len(target_keys.all_shards)} shard(s) "
            f"({per_shard}), {moved.seen_keys} seen-set keys into every shard, "
            f"{moved.spider_keys} keys of the spider"
            + (
                f"; not moved: {', '.join(f'{n} {k}' for k, n in sorted(moved.skipped.items()))}"
                if moved.skipped
                else ""
            )
        )


class CrawlMove:
    """One move of a spider's crawl from ``source`` (one Redis) to ``target``."""

    def __init__(
        self, source: redis.Redis, source_keys: RedisKeys, target: redis.Redis, keys: RedisKeys
    ) -> None:
        self.source = source
        self.source_keys = source_keys
        self.target = target
        self.keys = keys
        self.own = source_keys.prefix

    def check(self, *, overwrite: bool) -> None:
        """Refuse a source with leases (workers running) and a target already in use."""
        leased = self.source.zcard(self.source_keys.leases)
        if leased:
            raise MoveRefused(
                f"{leased} requests are leased in the source ({self.source_keys.leases}): "
                "stop its workers first (SIGTERM hands their leases back), or wait for the "
                "leases to expire"
            )
        if overwrite:
            return
        in_use = [
            key
            for shard in self.keys.all_shards
            for key in (shard.hosts, shard.seen, shard.requests_size, shard.leases)
        ] + [self.keys.start_urls, self.keys.items, self.keys.dead]
        held = [key for key in in_use if self.target.exists(key)]
        if held:
            raise MoveRefused(
                f"the target already holds a crawl of {self.keys.spider} ({', '.join(held[:3])}): "
                "pass --overwrite to replace it with the source's"
            )

    def run(self) -> Moved:
        moved = Moved()
        batch: list[bytes] = []
        for key in self._source_keys():
            batch.append(key)
            if len(batch) >= BATCH:
                self._move(batch, moved)
                batch = []
        if batch:
            self._move(batch, moved)
        self._counters(moved)
        self.target.sadd(SPIDERS, self.keys.spider)
        return moved

    def _source_keys(self) -> Iterator[bytes]:
        special = str.maketrans({c: "\\" + c for c in "*?[]\\"})
        yield from self.source.scan_iter(match=self.own.translate(special) + "*", count=1000)
        seeds = self.source_keys.start_urls
        if not seeds.startswith(self.own):
            for key in (seeds, self.source_keys.start_urls_rejected):
                if self.source.exists(key):
                    yield key.encode()

    def _move(self, batch: list[bytes], moved: Moved) -> None:
        """DUMP a batch of source keys and RESTORE each where it belongs."""
        pipe = self.source.pipeline(transaction=False)
        for key in batch:
            pipe.dump(key)
            pipe.pttl(key)
            pipe.type(key)
        replies = pipe.execute()
        writes = self.target.pipeline(transaction=False)
        sizes = self.source.pipeline(transaction=False)
        sized: list[int] = []
        for i, key in enumerate(batch):
            dumped, ttl, kind = replies[3 * i : 3 * i + 3]
            if dumped is None:
                continue  # gone meanwhile (expired)
            name = key.decode("utf-8", "surrogateescape")
            for target_key, shard in self._targets(name, kind, moved):
                writes.restore(target_key, max(ttl, 0), dumped, replace=True)
                if shard is not None:
                    if kind == b"zset":
                        sizes.zcard(key)
                    else:
                        sizes.llen(key)
                    sized.append(shard)
        writes.execute()
        for shard, n in zip(sized, sizes.execute(), strict=True):
            moved.requests[shard] += int(n)

    def _targets(self, name: str, kind: bytes, moved: Moved) -> list[tuple[str, int | None]]:
        """Where one source key goes: (target key, shard whose requests it holds, or None)."""
        seeds = self.source_keys.start_urls
        if name in (seeds, f"{seeds}:rejected"):
            moved.spider_keys += 1
            return [
                (self.keys.start_urls if name == seeds else self.keys.start_urls_rejected, None)
            ]
        suffix = name[len(self.own) :]
        for prefix, key_of in _HOST_KEYS.items():
            if suffix.startswith(prefix):
                host = suffix[len(prefix) :]
                moved.hosts.add(host)
                if prefix == "requests:jobs:":
                    moved.job_hosts.add(host)
                keys = self.keys.for_host(host)
                return [(key_of(keys, host), keys.shard if keys.sharded else 0)]
        if suffix in ("seen", "dupefilter") or suffix.startswith("seen:"):
            moved.seen_keys += 1
            return [(shard.frontier_prefix + suffix, None) for shard in self.keys.all_shards]
        if suffix in (
            "requests:hosts",
            "requests:host_delays",
            "requests:size",
            "requests:seq",
            "requests:job_turns",
        ):
            return []  # split by host, or recomputed: _counters
        if suffix in _LEASE_STATE or suffix in _NOT_MOVED:
            moved.skipped[suffix] += 1
            return []
        for prefix in _NOT_MOVED_PREFIXES:
            if suffix.startswith(prefix):
                moved.skipped[prefix + "*"] += 1
                return []
        if suffix == "requests:rejected":
            # Inspection list of entries that were not requests: no host to go by.
            return [(self.keys.all_shards[0].frontier_prefix + suffix, None)]
        moved.spider_keys += 1
        return [(self.keys.prefix + suffix, None)]

    def _counters(self, moved: Moved) -> None:
        """The ready-set and Crawl-delays split by host; each shard's counters."""
        src = self.source_keys
        by_shard: dict[int, dict[str, float]] = defaultdict(dict)
        for host, due in self.source.zscan_iter(src.hosts):
            name = host.decode("utf-8", "surrogateescape")
            by_shard[self._shard_of(name)][name] = due
        delays: dict[int, dict[Any, bytes]] = defaultdict(dict)
        for host, delay in self.source.hscan_iter(src.host_delays):
            name = host.decode("utf-8", "surrogateescape")
            delays[self._shard_of(name)][name] = delay
        seq = self.source.get(src.requests_seq)
        turns: dict[int, dict[Any, bytes]] = defaultdict(dict)
        for host in moved.job_hosts:
            turns[self._shard_of(host)][host] = b""  # its jobs take turns from the first
        pipe = self.target.pipeline(transaction=False)
        for index, shard in enumerate(self.keys.all_shards):
            pipe.delete(shard.hosts)  # one key a call: a cluster pipeline refuses more
            pipe.delete(shard.host_delays)
            pipe.delete(job_turns(shard))
            if by_shard[index]:
                pipe.zadd(shard.hosts, by_shard[index])
            if turns[index]:
                pipe.hset(job_turns(shard), mapping=turns[index])
            if delays[index]:
                pipe.hset(shard.host_delays, mapping=delays[index])
            pipe.set(shard.requests_size, moved.requests[index])
            if seq is not None:
                pipe.set(shard.requests_seq, seq)
        pipe.execute()

    def _shard_of(self, host: str) -> int:
        return self.keys.shard_of(host)
