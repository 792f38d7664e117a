"""``scrapy crawl``, refusing to start with one clear line when a setting cannot work
or Redis is away.

The checks read the settings the crawler will run with: the project's, the
spider's ``custom_settings`` and ``-s``, after every add-on of ``ADDONS`` has
run (the cluster's merges its components there). A crawl that is not the
cluster's (no ``spiders_project.Addon``, no spider or scheduler of ours) is
plain Scrapy's, unchecked: installing the distribution adds this command to
every project of the environment (pyproject.toml's ``scrapy.commands``).
"""

from __future__ import annotations

import argparse
import sys

import redis
from scrapy import Spider
from scrapy.commands.crawl import Command as ScrapyCrawlCommand
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured
from scrapy.settings import BaseSettings, Settings
from scrapy.spiderloader import get_spider_loader
from scrapy.utils.conf import build_component_list
from scrapy.utils.misc import build_from_crawler, load_object

from spiders_project.addon import Refused
from spiders_project.addon.checks import addon_enabled, needs_addon, start_problems
from spiders_project.archive.config import ArchiveConfig
from spiders_project.config import CONFIG_EXIT_STATUS, ConfigError, SettingsReader
from spiders_project.cookies.config import LoginConfig
from spiders_project.cookies.logins import logs_in_again
from spiders_project.crawl.suffixes import public_suffixes, suffix_list_file
from spiders_project.dead_letters.config import DeadLettersConfig
from spiders_project.frontier.config import FrontierConfig
from spiders_project.frontier.seen import SeenConfig, mode_problem
from spiders_project.frontier.steps import StepsConfig
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
    public_suffixes(suffix_list_file(settings))  # COOKIES_PUBLIC_SUFFIX_LIST's file
    LoginConfig.from_settings(settings)
    if StatsPublishConfig.enabled_in(settings):
        StatsPublishConfig.from_settings(settings)


def settings_after_addons(spidercls: type[Spider], settings: Settings) -> Settings:
    """The settings a crawler of ``spidercls`` runs with: ``settings``, the spider's
    ``custom_settings``, then every add-on of ``ADDONS`` as Scrapy applies them
    (``AddonManager.load_settings``), on a copy: the real crawl applies them again.

    A :class:`Refused` from the cluster's add-on propagates.
    """
    crawler = Crawler(spidercls, settings)  # copies settings, applies custom_settings
    final = crawler.settings.copy()
    for path in build_component_list(final["ADDONS"]):
        try:
            addon = build_from_crawler(load_object(path), crawler)
        except NotConfigured:
            continue  # Scrapy leaves it out too
        if hasattr(addon, "update_settings"):
            addon.update_settings(final)
    return final


class Command(ScrapyCrawlCommand):
    """Scrapy's crawl command, plus checks before anything starts.

    Without them a bad setting or an unreachable Redis surfaces as a
    traceback from deep inside the engine, after the spider has been opened.
    A setting problem exits with status 2, an unreachable Redis, or a Redis
    user that may not run what a worker runs (``acl_check.py``), with 1.
    """

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        assert self.settings is not None
        loader = get_spider_loader(self.settings)
        if len(args) != 1 or args[0] not in loader.list():
            super().run(args, opts)  # Scrapy's own usage error or "Spider not found"
            return
        spidercls = loader.load(args[0])
        try:
            settings = settings_after_addons(spidercls, self.settings)
        except Refused as refused:
            self._refuse(refused.problems, CONFIG_EXIT_STATUS)
            return
        if not addon_enabled(settings) and not needs_addon(settings, spidercls):
            super().run(args, opts)  # not a crawl of the cluster: plain Scrapy
            return
        if self._startable(args[0], spidercls, settings):
            super().run(args, opts)

    def _startable(self, spider: str, spidercls: type[Spider], settings: Settings) -> bool:
        """Whether nothing stops the crawl; else its lines are printed and the status set."""
        problems = start_problems(settings)
        if addon_enabled(settings):
            try:
                check_worker_settings(settings)
                logs_in_again(spidercls)  # session_expired without login
            except ConfigError as exc:
                problems.append(str(exc))
        if problems:
            return self._refuse(problems, CONFIG_EXIT_STATUS)
        message = ping_or_message(settings) or self._user_problem(spider, spidercls, settings)
        if message is not None:
            return self._refuse([message], 1)
        try:
            # Also records the frontier's shard count, or refuses another (shards.py).
            mismatch = mode_problem(settings, spider)
        except ConfigError as exc:
            mismatch = str(exc)
        except (redis.RedisError, OSError) as exc:
            # Redis went away between the ping and this read (a master killed
            # while the worker starts): one line and status 1, as unreachable.
            return self._refuse([unreachable_message(settings, exc)], 1)
        if mismatch is not None:
            return self._refuse([mismatch], CONFIG_EXIT_STATUS)
        return True

    def _refuse(self, problems: list[str], status: int) -> bool:
        for problem in problems:
            print(f"ERROR: {problem}", file=sys.stderr)
        self.exitcode = status
        return False

    def _user_problem(
        self, spider: str, spidercls: type[Spider], settings: BaseSettings
    ) -> str | None:
        """The line saying what REDIS_URL's user lacks of a worker's needs (acl_check.py)."""
        seeds = seeds_key_of(spidercls) or ""
        keys = RedisKeys(spider, seeds, cluster=RedisConfig.from_settings(settings).cluster)
        try:
            return permission_problem(settings, WORKER.name, [keys])
        except (redis.RedisError, OSError) as exc:
            return unreachable_message(settings, exc)
