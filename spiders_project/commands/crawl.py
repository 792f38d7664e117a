"""``scrapy crawl``, refusing to start with one clear line when a setting cannot work
or Redis is away."""

from __future__ import annotations

import argparse
import sys

import redis
from scrapy.commands.crawl import Command as ScrapyCrawlCommand
from scrapy.settings import BaseSettings
from scrapy.spiderloader import get_spider_loader

from spiders_project.archive.config import ArchiveConfig
from spiders_project.config import CONFIG_EXIT_STATUS, ConfigError, SettingsReader
from spiders_project.dead_letters.config import DeadLettersConfig
from spiders_project.frontier.config import FrontierConfig
from spiders_project.frontier.seen import SeenConfig, mode_problem
from spiders_project.frontier.steps import StepsConfig
from spiders_project.insides.scrapy_redis_compat import setting_problems
from spiders_project.item_buffer.backpressure import BackpressureConfig
from spiders_project.keys import RedisKeys, seeds_key_of
from spiders_project.node_health.config import NodeHealthConfig
from spiders_project.politeness.config import PacingConfig
from spiders_project.politeness.delays import HostPoliteness
from spiders_project.politeness.steered import steering_interval
from spiders_project.redis_access.acl import WORKER
from spiders_project.redis_access.acl_check import permission_problem
from spiders_project.redis_access.connection import (
    RedisConfig,
    ping_or_message,
    unreachable_message,
)
from spiders_project.redis_access.shards import wanted_shards
from spiders_project.rendering.config import RenderConfig
from spiders_project.spiders.sitemaps import SitemapConfig
from spiders_project.worker.heartbeat import StatsPublishConfig
from spiders_project.worker.shutdown import ShutdownConfig


def check_worker_settings(settings: BaseSettings) -> None:
    """Read every setting a worker uses, as its components will, so that a bad
    value fails here with one line (ConfigError) instead of as a traceback from
    inside the engine, after the spider has opened."""
    RedisConfig.from_settings(settings)
    FrontierConfig.from_settings(settings)
    HostPoliteness.from_settings(settings)
    steering_interval(settings)
    PacingConfig.from_settings(settings)
    NodeHealthConfig.from_settings(settings)
    BackpressureConfig.from_settings(settings)
    RenderConfig.from_settings(settings)
    SeenConfig.from_settings(settings)
    StepsConfig.from_settings(settings)
    wanted_shards(settings)
    read = SettingsReader(settings)
    # Scrapy's own settings that deployments set from the environment.
    read.getint("DEPTH_LIMIT", minimum=0)
    read.getfloat("DOWNLOAD_TIMEOUT", above=0)
    read.getint("RETRY_TIMES", minimum=0)
    SitemapConfig.from_settings(settings)  # ROBOTSTXT_OBEY
    ShutdownConfig.from_settings(settings)
    DeadLettersConfig.from_settings(settings)
    ArchiveConfig.from_settings(settings)
    if StatsPublishConfig.enabled_in(settings):
        StatsPublishConfig.from_settings(settings)


class Command(ScrapyCrawlCommand):
    """Scrapy's crawl command, plus checks before anything starts.

    Without them a bad setting or an unreachable Redis surfaces as a
    traceback from deep inside the engine, after the spider has been opened.
    A setting problem exits with status 2, an unreachable Redis, or a Redis
    user that may not run what a worker runs (``acl_check.py``), with 1.
    """

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        assert self.settings is not None
        problems = setting_problems(self.settings)
        try:
            check_worker_settings(self.settings)
        except ConfigError as exc:
            problems.append(str(exc))
        if problems:
            for problem in problems:
                print(f"ERROR: {problem}", file=sys.stderr)
            self.exitcode = CONFIG_EXIT_STATUS
            return
        message = ping_or_message(self.settings)
        if message is not None:
            print(f"ERROR: {message}", file=sys.stderr)
            self.exitcode = 1
            return
        lacking = self._user_problem(args[0]) if args else None
        if lacking is not None:
            print(f"ERROR: {lacking}", file=sys.stderr)
            self.exitcode = 1
            return
        try:
            # Also records the frontier's shard count, or refuses another (shards.py).
            mismatch = mode_problem(self.settings, args[0]) if args else None
        except ConfigError as exc:
            mismatch = str(exc)
        if mismatch is not None:
            print(f"ERROR: {mismatch}", file=sys.stderr)
            self.exitcode = CONFIG_EXIT_STATUS
            return
        super().run(args, opts)

    def _user_problem(self, spider: str) -> str | None:
        """The line saying what REDIS_URL's user lacks of a worker's needs (acl_check.py)."""
        assert self.settings is not None
        loader = get_spider_loader(self.settings)
        if spider not in loader.list():
            return None  # Scrapy says so itself
        seeds = seeds_key_of(loader.load(spider)) or ""
        keys = RedisKeys(spider, seeds, cluster=RedisConfig.from_settings(self.settings).cluster)
        try:
            return permission_problem(self.settings, WORKER.name, [keys])
        except (redis.RedisError, OSError) as exc:
            return unreachable_message(self.settings, exc)
