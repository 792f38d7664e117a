"""Each worker's heartbeat and Scrapy stats in Redis, for ``python -m monitor``.

Every ``STATS_PUBLISH_INTERVAL`` seconds a worker (id ``host:pid``) runs
``lua/publish_stats.lua`` once: one round trip, whatever the number of stats.
The script

- stores the worker's Scrapy stats in ``<spider>:worker:<id>`` (a hash that
  expires ``STATS_WORKER_RETENTION`` seconds after the last publish);
- sets ``<spider>:worker:<id>:heartbeat`` with a TTL (``STATS_HEARTBEAT_TTL``)
  and the id's score in ``<spider>:workers`` to the time of the publish;
- adds what the worker's metric counters grew by since its previous publish to
  ``<spider>:stats:totals``, the spider's all-time counters, which never go down
  when a worker restarts (a restarted worker is a new id counting from 0);
- appends a (time, pages total) sample to ``<spider>:stats:samples`` for the
  pages/s of ``scrapy crawlstatus``, and, when the newest is
  ``STATS_HISTORY_INTERVAL`` old, one to ``<spider>:stats:history``, kept
  ``STATS_HISTORY_RETENTION``: the console's chart of the last hour, which
  then outlives a restart of the monitor (one sample a minute for the whole
  cluster, whichever worker publishes first: about 60 members).

On ``spider_closed`` the worker publishes a last time, deletes its heartbeat
and leaves ``<spider>:workers``, so the monitor counts it out at once and does
not report it as lost. A worker that dies without closing (SIGKILL, a crash, a
node going down) stays listed with its heartbeat expired: that is a lost worker.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scrapy import signals
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured
from scrapy.settings import BaseSettings
from scrapy.statscollectors import StatsCollector

from spiders_project.archive.closing import ArchiveClosing
from spiders_project.archive.stats import METRIC_COUNTERS as WARC_COUNTERS
from spiders_project.config import SettingsReader
from spiders_project.frontier.config import FrontierConfig
from spiders_project.frontier.context import WorkerRedis, worker_id
from spiders_project.keys import RedisKeys
from spiders_project.keys.stats import stats_history
from spiders_project.plumbing.tasks import spawn_loop, stop_tasks
from spiders_project.read_model.contract import (
    CLOSED,
    COOKIES,
    ERRORS,
    FINISH_REASON_FIELD,
    ITEMS,
    LAST_SEEN_FIELD,
    PAGES,
    PROXY_BANS,
    PROXY_REQUESTS,
    RESPONSES,
    ROLE,
    RUN_FIELD,
    RUNNING,
    STATE_FIELD,
    WARC,
    WORKER_FIELD,
)
from spiders_project.redis_access import LuaScript, RedisUnavailable, load_lua

logger = logging.getLogger(__name__)

# The longest the last publish waits for the WARC archive to close and count
# its last records (seconds): its writer takes 60 at most (archive/middleware.py).
ARCHIVE_CLOSE_WAIT = 65.0

# Scrapy stats that become errors:<kind> counters.
_DOWNLOAD_ERRORS = "downloader/exception_type_count/"
_SPIDER_ERRORS = "spider_exceptions/"
_RESPONSE_STATUS = "downloader/response_status_count/"
_PROXY_REQUESTS = "proxies/requests/"
_PROXY_BANS = "proxies/bans/"
# The shared cookie jars' stats that become cookies:<name> counters.
_COOKIE_STATS = {"cookies/relogins": "relogins", "cookies/sessions_retired": "sessions_retired"}
_ERROR_STATS = {
    "dead_letters/count": "dead_letter",
    "seeds/rejected": "seed_rejected",
    "frontier/rejected": "frontier_rejected",
    "frontier/unserializable": "frontier_unserializable",
    "webhooks/dropped": "webhook_dropped",
}


def publish_script() -> LuaScript:
    """``lua/publish_stats.lua``."""
    return load_lua(Path(__file__).with_name("lua"), "publish_stats")


__all__ = ["StatsPublisher", "metric_counters", "publish_call", "worker_id"]


def metric_counters(stats: Mapping[str, Any]) -> dict[str, int]:
    """The counters the monitor exports, from a worker's Scrapy stats.

    ``pages`` and ``items`` are always there; ``errors:<kind>`` and
    ``responses:<status>`` once non-zero. Error kinds: ``download:<Exception>``
    (every failed download, retried or not), ``spider:<Exception>`` (a callback
    raised), ``dead_letter`` (a request given up for good), ``seed_rejected``,
    ``frontier_rejected``, ``frontier_unserializable``, ``webhook_dropped`` (a
    job event given up, ``jobs/webhook_delivery.py``). Per proxy (names
    without credentials): ``proxy_requests:<name>``, ``proxy_bans:<name>``.
    The shared cookie jars': ``cookies:relogins``, ``cookies:sessions_retired``.
    """
    counters = {
        PAGES: int(stats.get("response_received_count", 0)),
        ITEMS: int(stats.get("item_scraped_count", 0)),
    }
    for name, value in stats.items():
        if not isinstance(value, int | float) or isinstance(value, bool):
            continue
        if name.startswith(_RESPONSE_STATUS):
            field = RESPONSES + name[len(_RESPONSE_STATUS) :]
        elif name.startswith(_DOWNLOAD_ERRORS):
            # "twisted.internet.error.TimeoutError" -> "TimeoutError"
            field = f"{ERRORS}download:{name[len(_DOWNLOAD_ERRORS) :].rsplit('.', 1)[-1]}"
        elif name.startswith(_SPIDER_ERRORS):
            field = f"{ERRORS}spider:{name[len(_SPIDER_ERRORS) :]}"
        elif name in _ERROR_STATS:
            field = ERRORS + _ERROR_STATS[name]
        elif name in WARC_COUNTERS:
            field = WARC + WARC_COUNTERS[name]
        elif name in _COOKIE_STATS:
            field = COOKIES + _COOKIE_STATS[name]
        elif name.startswith(_PROXY_REQUESTS):
            field = PROXY_REQUESTS + name[len(_PROXY_REQUESTS) :]
        elif name.startswith(_PROXY_BANS):
            field = PROXY_BANS + name[len(_PROXY_BANS) :]
        else:
            continue
        counters[field] = counters.get(field, 0) + int(value)
    return counters


def flat_stats(stats: Mapping[str, Any]) -> dict[str, str]:
    """Scrapy's stats as hash fields: numbers as they are, times in ISO 8601."""
    flat = {}
    for name, value in stats.items():
        if isinstance(value, datetime.datetime):
            flat[name] = value.isoformat()
        elif isinstance(value, str | int | float):
            flat[name] = str(value)
    return flat


@dataclass(frozen=True)
class StatsPublishConfig:
    """The ``STATS_*`` settings, read once and checked."""

    interval: float
    heartbeat_ttl: float
    worker_retention: float
    samples_retention: float
    history_interval: float
    history_retention: float

    @staticmethod
    def enabled_in(settings: BaseSettings) -> bool:
        """``STATS_PUBLISH_ENABLED``: off, the other ``STATS_*`` settings go unread."""
        return SettingsReader(settings).getbool("STATS_PUBLISH_ENABLED")

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> StatsPublishConfig:
        read = SettingsReader(settings)
        config = cls(
            interval=read.getfloat("STATS_PUBLISH_INTERVAL", above=0),
            heartbeat_ttl=read.getfloat("STATS_HEARTBEAT_TTL", above=0),
            worker_retention=read.getfloat("STATS_WORKER_RETENTION", above=0),
            samples_retention=read.getfloat("STATS_SAMPLES_RETENTION", above=0),
            history_interval=read.getfloat("STATS_HISTORY_INTERVAL", above=0),
            history_retention=read.getfloat("STATS_HISTORY_RETENTION", above=0),
        )
        read.check(
            config.heartbeat_ttl > config.interval,
            "STATS_HEARTBEAT_TTL",
            "must be longer than STATS_PUBLISH_INTERVAL",
        )
        read.check(
            config.worker_retention >= config.heartbeat_ttl,
            "STATS_WORKER_RETENTION",
            "must be at least STATS_HEARTBEAT_TTL",
        )
        read.check(
            config.history_retention >= config.history_interval,
            "STATS_HISTORY_RETENTION",
            "must be at least STATS_HISTORY_INTERVAL",
        )
        return config


def publish_call(
    keys: RedisKeys,
    worker: str,
    run: str,
    *,
    first: bool,
    state: str,
    config: StatsPublishConfig,
    stats: Mapping[str, Any],
    extra: Mapping[str, str] | None = None,
    now: int | str = "",
) -> tuple[list[str], list[Any]]:
    """KEYS and ARGV of ``publish_stats.lua`` for one publish of ``stats`` (at ``now``: see
    ``plumbing/clock.py``)."""
    counters = metric_counters(stats)
    others = {**flat_stats(stats), **(extra or {})}
    args: list[Any] = [
        now,
        worker,
        run,
        "1" if first else "0",
        "1" if state == RUNNING else "0",
        int(config.heartbeat_ttl * 1000),
        int(config.worker_retention * 1000),
        int(config.samples_retention * 1000),
        state,
        WORKER_FIELD,
        RUN_FIELD,
        STATE_FIELD,
        LAST_SEEN_FIELD,
        PAGES,
        int(config.history_interval * 1000),
        int(config.history_retention * 1000),
        len(counters),
    ]
    for field, value in counters.items():
        args += [field, value]
    for field, text in others.items():
        if field not in counters:
            args += [field, text]
    script_keys = [
        keys.worker_stats(worker),
        keys.worker_heartbeat(worker),
        keys.workers,
        keys.stats_totals,
        keys.stats_samples,
        stats_history(keys),
    ]
    return script_keys, args


class StatsPublisher:
    """Publishes this worker's stats and heartbeat; see the module docstring.

    A publish is one call of the script on the worker's asyncio client: one
    round trip per interval, whatever the number of stats. It does not ride in
    the write batcher: a write waiting there counts as pending work for the
    idle check (``RedisSpider._cluster_is_idle``), and a periodic one kept
    idle workers from ever closing. While Redis is away no publish is tried;
    the next one carries absolute values, so skipping loses nothing.
    """

    def __init__(
        self,
        stats: StatsCollector,
        redis: WorkerRedis,
        config: StatsPublishConfig,
        *,
        worker: str,
        close_timeout: float,
        archive: ArchiveClosing | None = None,
        role: str = "",
    ) -> None:
        self.stats = stats
        self.role = role  # WORKER_ROLE, published as a stat (contract.ROLE)
        # Closed, its last records counted, before the last publish (archive/closing.py).
        self.archive = archive
        self.redis = redis
        self.config = config
        self.worker = worker
        self.run = uuid.uuid4().hex
        self.close_timeout = close_timeout
        self._script = publish_script()
        self._first = True
        self._signed_off = False
        self._task: asyncio.Task[None] | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> StatsPublisher:
        settings = crawler.settings
        if not StatsPublishConfig.enabled_in(settings):
            raise NotConfigured("STATS_PUBLISH_ENABLED is off")
        frontier = FrontierConfig.from_settings(settings)
        publisher = cls(
            crawler.stats,
            WorkerRedis.of(crawler),
            StatsPublishConfig.from_settings(settings),
            worker=worker_id(),
            close_timeout=frontier.close_timeout,
            archive=ArchiveClosing.of(crawler),
            role=frontier.role,
        )
        crawler.signals.connect(publisher.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(publisher.spider_closed, signal=signals.spider_closed)
        return publisher

    def call(
        self, state: str, extra: Mapping[str, str] | None = None
    ) -> tuple[list[str], list[Any]]:
        """KEYS and ARGV of a publish of the current stats."""
        return publish_call(
            self.redis.keys,
            self.worker,
            self.run,
            first=self._first,
            state=state,
            config=self.config,
            stats=self.stats.get_stats(),
            extra=extra,
            now=self.redis.clock.arg(),
        )

    async def publish(self, state: str = RUNNING, extra: Mapping[str, str] | None = None) -> None:
        """One publish, tried once; raises RedisUnavailable, or a caller's error (logged)."""
        keys, args = self.call(state, extra)
        await self.redis.calls.script(self._script, keys, args, retry=False)
        self._first = False

    def spider_opened(self) -> None:
        if self.role:
            self.stats.set_value(ROLE, self.role)
        self._task = spawn_loop("stats publisher", self._loop())

    async def _loop(self) -> None:
        logger.info(
            "Publishing stats to Redis as worker %s every %.0f s (heartbeat %s, TTL %.0f s)",
            self.worker,
            self.config.interval,
            self.redis.keys.worker_heartbeat(self.worker),
            self.config.heartbeat_ttl,
        )
        while True:
            if self.redis.state.connected:
                try:
                    await self.publish()
                except RedisUnavailable:
                    pass  # the call path logs Redis' state changes
                except Exception:  # noqa: BLE001 - a caller's error, logged by the call path
                    pass  # the next publish carries absolute values
            await asyncio.sleep(self.config.interval)

    async def spider_closed(self, reason: str) -> None:
        await self.sign_off(reason)

    async def sign_off(self, reason: str) -> None:
        """The last publish: heartbeat deleted, id unlisted, so no one reports us lost.

        Runs on ``spider_closed``; a component that ends the process without
        that signal (``os._exit``) should await it first. Only the first call
        publishes.
        """
        if self._signed_off:
            return
        self._signed_off = True
        if self._task is not None:
            await stop_tasks([self._task])
        if self.archive is not None:
            await self.archive.close(ARCHIVE_CLOSE_WAIT)
        heartbeat = self.redis.keys.worker_heartbeat(self.worker)
        if not self.redis.state.connected:
            logger.warning(
                "Redis is away: no last stats publish; heartbeat %s expires in %.0f s",
                heartbeat,
                self.config.heartbeat_ttl,
            )
            return
        try:
            async with asyncio.timeout(self.close_timeout):
                await self.publish(CLOSED, {FINISH_REASON_FIELD: reason})
        except Exception as exc:  # noqa: BLE001 - RedisUnavailable, a timeout, a refusal
            logger.warning(
                "Last stats publish failed (%s: %s); heartbeat %s expires in %.0f s",
                type(exc).__name__,
                exc,
                heartbeat,
                self.config.heartbeat_ttl,
            )
        else:
            logger.info("Published final stats; worker %s signed off", self.worker)
        finally:
            # We are the clients' last user (on spider_closed the scheduler has
            # closed them already, and this call opened a connection again).
            await self.redis.aclose()
