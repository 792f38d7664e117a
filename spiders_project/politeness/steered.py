"""Hosts an operator steers at runtime (``scrapy frontier host``), as every worker sees them.

Each worker reads ``<spider>:hosts:steering`` once every
``HOST_STEERING_INTERVAL`` (1 s): one HGETALL of a small hash a second,
instead of a Redis command per link or per lease. What it read then serves:

- the delays (``delays.HostPoliteness``): an override replaces the configured
  delay in every lease call and in the dispatch gate;
- the block (``steps.BlockedHostStep``): links of a blocked host are refused,
  and a request of one that was leased anyway (enqueued or leased before this
  worker saw the block) is dropped before it is fetched.

So a change reaches every worker within the interval plus one round trip,
well inside the 2 s the operator is promised. The cap needs no worker: the
lease script reads it from the host's shard (``frontier/lua/lease.lua``).
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

from scrapy import signals
from scrapy.crawler import Crawler
from scrapy.settings import BaseSettings

from spiders_project.config import SettingsReader
from spiders_project.frontier.context import WorkerRedis
from spiders_project.keys import LANES, RedisKeys
from spiders_project.keys.jobs import host_jobs, job_counts
from spiders_project.plumbing.tasks import repeat, spawn_loop, stop_tasks
from spiders_project.plumbing.wiring import shared
from spiders_project.read_model.host_steering import HostSteer, InvalidSteering, parse_steering
from spiders_project.redis_access import LuaScript, SyncRedisCalls, load_lua

logger = logging.getLogger(__name__)

LUA_DIR = Path(__file__).with_name("lua")
# The longest HOST_STEERING_INTERVAL: a change must reach every worker within 2 s.
MAX_INTERVAL = 1.5
# ARGV[2] of steer_host.lua that leaves a host's limits as they are.
KEEP_LIMITS = "-"


def steer_script() -> LuaScript:
    """``lua/steer_host.lua``: a host's limits and its purge, in its shard."""
    return load_lua(LUA_DIR, "steer_host")


def record_script() -> LuaScript:
    """``lua/steer_record.lua``: a host's steering record, changed field by field."""
    return load_lua(LUA_DIR, "steer_record")


def record_call(
    keys: RedisKeys, host: str, delay: str, cap: str, blocked: bool | None
) -> tuple[list[str], list[str]]:
    """``steer_record.lua`` for ``host``: ``delay`` and ``cap`` as text ("" keeps,
    "default" clears), ``blocked`` None to keep it."""
    flag = "" if blocked is None else ("1" if blocked else "0")
    return [keys.host_steering], [host, delay, cap, flag]


def steer_call(
    keys: RedisKeys, host: str, limits: str, *, purge: bool
) -> tuple[list[str], list[str]]:
    """``steer_host.lua`` for ``host``: ``limits`` as ``HostSteer.limits`` gives
    them ("" clears, ``KEEP_LIMITS`` keeps), and its queues purged if ``purge``."""
    shard = keys.for_host(host)
    script_keys = [shard.host_limits]
    for lane in LANES:
        k = shard.in_lane(lane)
        script_keys += [
            k.hosts,
            k.requests_size,
            k.host_queue(host),
            k.host_later(host),
            k.host_list(host),
            host_jobs(k, host),
        ]
    script_keys.append(job_counts(shard))
    return script_keys, [host, limits, "1" if purge else "0"]


def steer_host(
    calls: SyncRedisCalls,
    keys: RedisKeys,
    host: str,
    *,
    delay: str,
    cap: str,
    blocked: bool | None,
    purge: bool,
) -> dict[str, Any]:
    """An operator's change of ``host`` (``scrapy frontier host``, the console).

    ``delay`` and ``cap`` as :func:`record_call` takes them ("" keeps, "default"
    clears, else the value's text), ``blocked`` None to keep it; ``purge``
    empties its queues (a block should). The record every worker reads is
    written first, in one script (a block is then refused by the workers), then
    the host's limits and its purge in its shard. Returns ``{"changed": bool}``,
    with ``purged`` and ``purged_retries`` when purged.
    """
    script_keys, args = record_call(keys, host, delay, cap, blocked)
    before, after = calls.script(record_script(), script_keys, args, retry=False)
    old, new = _record(before), _record(after)
    script_keys, args = steer_call(keys, host, new.limits(), purge=purge)
    queued, later = calls.script(steer_script(), script_keys, args, retry=False)
    out: dict[str, Any] = {"changed": new != old}
    if purge:
        out.update(purged=int(queued) + int(later), purged_retries=int(later))
    return out


def _record(raw: Any) -> HostSteer:
    """A record the script returned; one that is not ours counts as none (it is replaced)."""
    try:
        return HostSteer.from_json(raw) if raw else HostSteer()
    except InvalidSteering:
        return HostSteer()


def steering_interval(settings: BaseSettings) -> float:
    """HOST_STEERING_INTERVAL, checked: 0.05 to MAX_INTERVAL seconds."""
    read = SettingsReader(settings)
    interval = read.getfloat("HOST_STEERING_INTERVAL", minimum=0.05)
    read.check(
        interval <= MAX_INTERVAL,
        "HOST_STEERING_INTERVAL",
        f"at most {MAX_INTERVAL:g} s: a change must reach every worker within 2 s",
    )
    return interval


class SteeredHosts:
    """This worker's copy of the steered hosts, refreshed every interval."""

    def __init__(self, redis: WorkerRedis | None, interval: float) -> None:
        self.redis = redis
        self.interval = interval
        self.steered: dict[str, HostSteer] = {}
        self.blocked: frozenset[str] = frozenset()
        self._delays_ms: dict[str, int] = {}
        self._bad: dict[str, str] = {}
        self._task: asyncio.Task[None] | None = None

    @classmethod
    def of(cls, crawler: Crawler) -> SteeredHosts:
        """The crawler's one copy; its loop runs while the spider is open."""

        def build() -> SteeredHosts:
            steered = cls(WorkerRedis.of(crawler), steering_interval(crawler.settings))
            crawler.signals.connect(steered.spider_opened, signal=signals.spider_opened)
            crawler.signals.connect(steered.spider_closed, signal=signals.spider_closed)
            return steered

        return shared(crawler, cls, build)

    def delay_ms(self, host: str) -> int | None:
        """The operator's delay of ``host`` (ms), or None."""
        return self._delays_ms.get(host)

    def update(self, entries: dict[Any, Any]) -> None:
        """Take a HGETALL of the steering hash; a record that is not ours is
        skipped, with one line until it changes."""
        steered, bad = parse_steering(entries)
        for host, why in bad.items():
            if self._bad.get(host) != why:
                logger.error("Host steering of %s ignored: %s", host, why)
        self._bad = bad
        if steered != self.steered:
            logger.info(
                "Host steering: %d hosts steered, %d blocked",
                len(steered),
                sum(1 for s in steered.values() if s.blocked),
            )
        self.steered = steered
        self.blocked = frozenset(h for h, s in steered.items() if s.blocked)
        self._delays_ms = {h: d for h, s in steered.items() if (d := s.delay_ms) is not None}

    async def refresh(self) -> None:
        """One read of the steering hash. Raises RedisUnavailable."""
        assert self.redis is not None
        entries = await self.redis.calls.command(
            "HGETALL", self.redis.keys.host_steering, retry=False, writes=False
        )
        self.update(entries)

    def spider_opened(self) -> None:
        if self.redis is not None and self._task is None:
            self._task = spawn_loop("host steering", self._loop())

    async def spider_closed(self) -> None:
        if self._task is not None:
            await stop_tasks([self._task])
            self._task = None

    async def _loop(self) -> None:
        # A failed read keeps the last copy; the next one tries again.
        await repeat(self.refresh, self.interval, "Reading the host steering", logger)
