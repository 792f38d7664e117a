"""The Redis side of one worker: its one call path, its identity and the write batcher.

Shared by the scheduler, the seed reader, the item pipeline and the
extensions, so that all their writes travel in one ordered transaction per
tick and every call goes through one :class:`~spiders_project.redis_access.RedisCalls`
(one connection state, one backoff, one round-trip counter).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import redis.asyncio
from scrapy.crawler import Crawler

from spiders_project.frontier.config import FrontierConfig
from spiders_project.frontier.lease_id import NO_SHARD, Lease, prefix
from spiders_project.frontier.scripts import FrontierScripts
from spiders_project.frontier.seen import EXACT, SeenConfig
from spiders_project.frontier.write_behind.batcher import RedisBatcher
from spiders_project.keys import LANES, SPIDERS, RedisKeys, seeds_key_of
from spiders_project.plumbing.clock import RedisTime, ScriptClock
from spiders_project.plumbing.wiring import shared
from spiders_project.redis_access import RedisCalls, RedisState
from spiders_project.redis_access.connection import RedisConfig, async_client
from spiders_project.redis_access.shards import spider_keys

logger = logging.getLogger("spiders_project.redis")
T = TypeVar("T")


@dataclass
class LeaseRead:
    """What one lease call carries for a component that reads Redis again for the
    requests it leases (a shared cookie jar, ``cookies/store.py``): ``fields``,
    (hash, field) pairs on the spider's own slot that the lease script reads
    after its leases and returns with them (``lua/lease.lua``: one EVALSHA, no
    round trip nor pipeline of their own), and ``answered(at, replies)``, called
    once the call answered, ``at`` being the ``LEASED_AT`` of its requests.
    ``replies`` are the fields' values, or None where they could not ride with
    the call (a Redis Cluster: the hashes are in another slot than the queue's):
    the component then reads on its own."""

    fields: list[tuple[str, str]]
    answered: Callable[[float, list[Any] | None], None]


def worker_id() -> str:
    """This process' id in Redis and in metric labels: ``host:pid``."""
    return f"{socket.gethostname()}:{os.getpid()}"


class WorkerRedis:
    """Everything a worker process uses to talk to the shared Redis.

    ``lease_owner`` names this process run in its lease ids: ``host:pid``
    plus a random part, because a restarted container reuses both.
    """

    def __init__(
        self,
        client: redis.asyncio.Redis,
        keys: RedisKeys,
        state: RedisState,
        flush_interval: float,
        crawler: Crawler | None = None,
        seen: SeenConfig | None = None,
        wait: tuple[int, float] = (0, 1.0),
        client_for: Callable[[str], redis.asyncio.Redis] | None = None,
        batcher_client: redis.asyncio.Redis | None = None,
    ) -> None:
        self.client = client
        # A client for the slot of another key (Redis Cluster), given that key.
        self._client_for = client_for
        self.keys = keys
        self.state = state
        self._crawler = crawler
        self.calls = RedisCalls(client, state, self.round_trip)
        state.on_noperm.append(self.noperm)
        state.on_refused_writes.append(self.refused_writes)
        # The call paths of the frontier shards' slots (Redis Cluster), by
        # prefix, and the connection state of each slot's master.
        self._shard_calls: dict[str, RedisCalls] = {keys.prefix: self.calls}
        self._states: dict[str, RedisState] = {keys.prefix: state}
        # The write batcher's own clients, one per slot: its WAIT must go on
        # the connection that sent the writes it waits for (WAIT counts the
        # replicas that have that connection's last write), and a client the
        # lease loop and the seed reader share could hand it another one.
        # The batcher sends one call at a time per slot, so each of its
        # clients holds a single connection.
        self._batcher_calls: dict[str, RedisCalls] = {
            keys.prefix: RedisCalls(batcher_client or client, state, self.round_trip)
        }
        self.scripts = FrontierScripts()
        # Who reads Redis again for each lease call's requests (LeaseRead):
        # called with whether its reads can ride with the call (lease_reads).
        self.lease_readers: list[Callable[[bool], LeaseRead]] = []
        self.worker = worker_id()
        self.lease_owner = f"{self.worker}:{uuid.uuid4().hex[:6]}"
        # Production never sets it: the scripts then read Redis' clock.
        self.clock = ScriptClock()
        # Redis' wall clock for what this worker stamps itself (sync_time).
        self.time = RedisTime()
        self.seen = seen or EXACT
        # (REDIS_WAIT_REPLICAS, REDIS_WAIT_TIMEOUT): replicas that confirm writes.
        self.batcher = RedisBatcher(
            self._batcher_calls[keys.prefix],
            keys,
            flush_interval,
            self.clock,
            self.seen.spec,
            wait[0],
            wait[1],
            calls_for=self._batcher_calls_for,
        )

    def calls_for(self, keys: RedisKeys) -> RedisCalls:
        """The call path to the master of ``keys``' frontier slot (shards.py).

        This worker's own calls unless the frontier is sharded over a Redis
        Cluster; then one client per shard, each with the connection state of
        its master (``_state_of``), all counting round trips together.
        """
        return self._calls_of(self._shard_calls, keys.frontier_prefix)

    def _batcher_calls_for(self, keys: RedisKeys) -> RedisCalls:
        """The write batcher's call path to the master of ``keys``' frontier slot."""
        return self._calls_of(self._batcher_calls, keys.frontier_prefix)

    def _calls_of(self, known: dict[str, RedisCalls], prefix: str) -> RedisCalls:
        calls = known.get(prefix)
        if calls is None:
            assert self._client_for is not None, "a sharded frontier needs client_for"
            calls = RedisCalls(self._client_for(prefix), self._state_of(prefix), self.round_trip)
            known[prefix] = calls
        return calls

    def _state_of(self, prefix: str) -> RedisState:
        """The connection state of a shard's master: its own, since one master
        of a cluster may be away while the others answer (one state for all
        would log "lost" and "reconnected" at every call of each). Its
        reconnect callbacks are this worker's (the same list)."""
        state = self._states.get(prefix)
        if state is None:
            home = self.state
            state = RedisState(home.url, home.backoff, home.backoff_max, home.logger)
            state.url = f"{home.url}, slot of {prefix.rstrip(':')}"
            state.on_reconnect = home.on_reconnect
            state.on_noperm = home.on_noperm
            state.on_refused_writes = home.on_refused_writes
            self._states[prefix] = state
        return state

    def lease_reads(self, calls: RedisCalls) -> list[LeaseRead]:
        """What a lease call on ``calls`` carries for ``lease_readers``: their reads ride
        with it on one Redis (not a Cluster), where the spider's own keys are."""
        ride = calls is self.calls and not self.keys.cluster
        return [reader(ride) for reader in self.lease_readers]

    def keys_of_lease(self, lease: Lease) -> RedisKeys:
        """The keys of the shard and lane (HTTP or render queue) that gave ``lease``."""
        keys = self.keys.of_shard(lease.shard) if self.keys.sharded else self.keys
        return keys.in_lane(lease.lane)

    def lease_prefix(self, keys: RedisKeys) -> str:
        """What this worker's lease ids of ``keys``' queue start with (``lease_id.prefix``):
        they name the shard and lane, so that an ack finds its queue."""
        return prefix(self.lease_owner, keys.shard if keys.sharded else NO_SHARD, keys.lane)

    @property
    def shard_calls(self) -> list[tuple[RedisKeys, RedisCalls]]:
        """Every shard's keys with its call path (one pair when not sharded)."""
        return [(keys, self.calls_for(keys)) for keys in self.keys.all_shards]

    def queue_calls(self, lanes: Sequence[str] = LANES) -> list[tuple[RedisKeys, RedisCalls]]:
        """The keys of every queue (each shard's, in each of ``lanes``) with its call path."""
        return [(keys.in_lane(lane), calls) for keys, calls in self.shard_calls for lane in lanes]

    async def per_shard(self, call: Callable[[RedisKeys, RedisCalls], Awaitable[T]]) -> list[T]:
        """``call(keys, calls)`` for every shard at once, replies in shard order."""
        return list(await asyncio.gather(*(call(keys, calls) for keys, calls in self.shard_calls)))

    async def pipelined(
        self, name: str, commands: Sequence[Sequence[Any]], *, retry: bool = True
    ) -> list[Any]:
        """Read-only ``commands`` (each naming its key first), one round trip per
        slot they touch, sent together; replies in their order."""
        if not self.keys.sharded:
            return await self.calls.pipelined(name, commands, retry=retry)
        slots: dict[str, list[int]] = {}
        for i, command in enumerate(commands):
            keys = self.keys
            for shard in self.keys.all_shards:
                if str(command[1]).startswith(shard.frontier_prefix):
                    keys = shard
            slots.setdefault(keys.frontier_prefix, []).append(i)
        shards = {keys.frontier_prefix: keys for keys in self.keys.all_shards}
        shards[self.keys.prefix] = self.keys
        replies = await asyncio.gather(
            *(
                self.calls_for(shards[prefix]).pipelined(
                    name, [commands[i] for i in indexes], retry=retry
                )
                for prefix, indexes in slots.items()
            )
        )
        ordered: list[Any] = [None] * len(commands)
        for indexes, answers in zip(slots.values(), replies, strict=True):
            for i, answer in zip(indexes, answers, strict=True):
                ordered[i] = answer
        return ordered

    async def frontier_size(self, *, retry: bool = True) -> int:
        """Requests queued in the whole frontier (every queue's requests:size)."""

        async def size(keys: RedisKeys, calls: RedisCalls) -> int:
            return int(
                await calls.command("GET", keys.requests_size, retry=retry, writes=False) or 0
            )

        return sum(await asyncio.gather(*(size(k, c) for k, c in self.queue_calls())))

    async def aclose(self) -> None:
        """Close every client (the frontier shards' too)."""
        clients = {id(c.client): c.client for c in self._shard_calls.values()}
        clients.update({id(c.client): c.client for c in self._batcher_calls.values()})
        for client in clients.values():
            await client.aclose()

    async def register_spider(self) -> None:
        """Add the spider to the set ``db_writer --all-spiders`` reads (keys.SPIDERS).

        On a Redis Cluster that set lives in another slot than the spider's
        keys, so another master than this worker's client talks to: one
        call, retried until Redis takes it, on a client of its own.
        """
        if not self.keys.cluster or self._client_for is None:
            self.batcher.command("SADD", SPIDERS, self.keys.spider)
            return
        client = self._client_for(SPIDERS)
        try:
            await RedisCalls(client, self._state_of(SPIDERS), self.round_trip).command(
                "SADD", SPIDERS, self.keys.spider
            )
        finally:
            await client.aclose()

    async def sync_time(self) -> None:
        """Measure this node's clock against Redis' (``RedisTime``); raises RedisUnavailable.

        Logs once when the two differ by more than a second: everything the
        cluster times runs on Redis' clock, so such a node still crawls
        correctly, but its own log lines and its operator's tools do not.
        """
        sent = time.time()
        seconds, micros = await self.calls.command("TIME", retry=False, writes=False)
        received = time.time()
        was_known = self.time.known
        self.time.observe(int(seconds) + int(micros) / 1e6, sent, received)
        if not was_known and abs(self.time.offset) > 1.0:
            logger.warning(
                "This node's clock is %+.1f s off Redis' clock: the crawl follows Redis' clock",
                -self.time.offset,
            )

    def noperm(self, command: str) -> None:
        """Count a call Redis refused to this worker's user (stat ``redis/noperm``)."""
        if self._crawler is not None:
            self._crawler.stats.inc_value("redis/noperm")

    def refused_writes(self, code: str) -> None:
        """Count a write Redis refused for a passing reason (stat
        ``redis/writes_refused/<code>``: ``oom``, ``readonly``, ``noreplicas``, ...)."""
        if self._crawler is not None:
            self._crawler.stats.inc_value(f"redis/writes_refused/{code.lower()}")

    def round_trip(self) -> None:
        """Count one request/reply exchange with Redis (stat ``redis/round_trips``)."""
        if self._crawler is not None:
            self._crawler.stats.inc_value("redis/round_trips")

    @classmethod
    def of(cls, crawler: Crawler) -> WorkerRedis:
        """The context of this crawler, created on first use."""

        def build() -> WorkerRedis:
            settings = crawler.settings
            redis_config = RedisConfig.from_settings(settings)
            assert crawler.spidercls is not None
            keys = spider_keys(
                settings, crawler.spidercls.name, seeds_key_of(crawler.spidercls) or ""
            )
            return cls(
                client=async_client(settings, keys.prefix),
                keys=keys,
                state=RedisState.from_settings(settings, logger),
                flush_interval=FrontierConfig.from_settings(settings).flush_interval,
                crawler=crawler,
                seen=SeenConfig.from_settings(settings),
                wait=(redis_config.wait_replicas, redis_config.wait_timeout),
                client_for=lambda key: async_client(settings, key),
                batcher_client=async_client(settings, keys.prefix),
            )

        return shared(crawler, cls, build)
