"""``spiders_project.Addon`` in a project that is not this checkout: what it sets and refuses.

Each crawler here is Scrapy's own (``scrapy.utils.test.get_crawler``) with a
settings dict standing for someone else's settings.py (project priority) and
the add-on applied by Scrapy, after the spider's ``custom_settings``. No
reactor, no engine: nothing connects anywhere.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from scrapy import Spider
from scrapy.crawler import Crawler
from scrapy.settings import Settings
from scrapy.utils.conf import build_component_list
from scrapy.utils.test import get_crawler

from spiders_project import settings as defaults
from spiders_project.addon import Addon, Refused, components
from spiders_project.addon.checks import (
    GUARD,
    NOT_ENABLED,
    identity,
    needs_addon,
    start_problems,
)
from spiders_project.addon.defaults import ENVIRONMENT_PRIORITY, apply_defaults, default_values
from spiders_project.process import project_settings
from spiders_project.spiders import RedisSpider

ADDONS = {"ADDONS": {"spiders_project.Addon": 0}}
USER_AGENT_MW = "scrapy.downloadermiddlewares.useragent.UserAgentMiddleware"
ROBOTS = "scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware"
RETRY = "scrapy.downloadermiddlewares.retry.RetryMiddleware"
OWN_EXTENSION = "scrapy.extensions.closespider.CloseSpider"
PLAYWRIGHT_HANDLER = "scrapy_playwright.handler.ScrapyPlaywrightDownloadHandler"


class Pages(RedisSpider):
    name = "pages"


class OwnMiddleware(RedisSpider):
    """A spider that names one downloader middleware of its own, as many real ones do."""

    name = "own_middleware"
    custom_settings = {"DOWNLOADER_MIDDLEWARES": {f"{__name__}.UserAgent": 401}}


class OwnExtensions(RedisSpider):
    name = "own_extensions"
    custom_settings = {
        "DOWNLOADER_MIDDLEWARES": {f"{__name__}.UserAgent": 401},
        "EXTENSIONS": {OWN_EXTENSION: 10},
    }


class UserAgent:
    def process_request(self, request: Any) -> None:
        request.headers["User-Agent"] = "own"


def crawler(spidercls: type[Spider], project: dict[str, Any] | None = None) -> Crawler:
    """A crawler of someone's project: ``project`` is its settings.py (with the ADDONS
    line unless it says otherwise). Scrapy's test crawler names its reactorless
    aiohttp handlers at project priority; a real project does not."""
    return get_crawler(spidercls, {"DOWNLOAD_HANDLERS": {}, **ADDONS, **(project or {})})


def enabled(crawler: Crawler, name: str) -> list[str]:
    """The components of ``name`` Scrapy builds, as dotted paths, in order."""
    merged = crawler.settings.get_component_priority_dict_with_base(name)
    return [identity(key) for key in build_component_list(merged)]


def cluster(name: str) -> list[str]:
    return [path for path, order in components.ORDERED[name].items() if order is not None]


# --- merged, never replaced ---------------------------------------------------------
def test_a_project_with_the_addon_line_gets_every_cluster_component() -> None:
    c = crawler(Pages)
    for name in components.ORDERED:
        assert set(cluster(name)) <= set(enabled(c, name)), name
    assert ROBOTS not in enabled(c, "DOWNLOADER_MIDDLEWARES")
    assert RETRY not in enabled(c, "DOWNLOADER_MIDDLEWARES")
    handlers = c.settings.getwithbase("DOWNLOAD_HANDLERS")
    assert dict(handlers) | dict(components.DOWNLOAD_HANDLERS) == dict(handlers)
    assert c.settings["SCHEDULER"] == defaults.SCHEDULER
    assert c.settings["TWISTED_REACTOR"] == defaults.TWISTED_REACTOR


@pytest.mark.parametrize("spidercls", [OwnMiddleware, OwnExtensions])
def test_a_spiders_own_component_dicts_add_to_the_clusters(spidercls: type[Spider]) -> None:
    """Its one middleware (and extension) next to every cluster component, and
    Scrapy's robots.txt and retry middlewares still off."""
    c = crawler(spidercls)
    plain = crawler(Pages)
    middlewares = enabled(c, "DOWNLOADER_MIDDLEWARES")
    assert middlewares == sorted(
        [*enabled(plain, "DOWNLOADER_MIDDLEWARES"), f"{__name__}.UserAgent"],
        key=middlewares.index,
    )
    assert set(middlewares) - set(enabled(plain, "DOWNLOADER_MIDDLEWARES")) == {
        f"{__name__}.UserAgent"
    }
    assert ROBOTS not in middlewares and RETRY not in middlewares
    extensions = set(enabled(c, "EXTENSIONS"))
    assert extensions >= set(enabled(plain, "EXTENSIONS"))
    assert "spiders_project.item_buffer.buffer.ItemBuffer" in extensions
    assert c.settings.getpriority("DOWNLOADER_MIDDLEWARES") == 30  # still the spider's


def test_a_projects_own_lists_are_kept_and_one_component_switched_off_by_name() -> None:
    c = crawler(
        Pages,
        {
            "DOWNLOADER_MIDDLEWARES": {f"{__name__}.UserAgent": 401, GUARD: None},
            "ITEM_PIPELINES": {"scrapy.pipelines.images.ImagesPipeline": 1},
        },
    )
    middlewares = enabled(c, "DOWNLOADER_MIDDLEWARES")
    assert f"{__name__}.UserAgent" in middlewares
    assert GUARD not in middlewares  # off by name: allowed, and not added back
    assert set(cluster("DOWNLOADER_MIDDLEWARES")) - set(middlewares) == {GUARD}
    assert enabled(c, "ITEM_PIPELINES") == ["scrapy.pipelines.images.ImagesPipeline"]


def test_a_component_named_by_its_class_is_not_added_twice() -> None:
    from spiders_project.scope.networks import NetworkGuardMiddleware

    c = crawler(Pages, {"DOWNLOADER_MIDDLEWARES": {NetworkGuardMiddleware: 651}})
    merged = c.settings.get_component_priority_dict_with_base("DOWNLOADER_MIDDLEWARES")
    assert [merged[k] for k in merged if identity(k) == GUARD] == [651]


# --- plain values: which one wins ----------------------------------------------------
def test_every_default_but_the_projects_own_names_and_the_project_wins() -> None:
    c = crawler(Pages, {"BOT_NAME": "theirs", "CONCURRENT_REQUESTS": 3})
    assert c.settings["BOT_NAME"] == "theirs"
    assert c.settings.getint("CONCURRENT_REQUESTS") == 3
    assert c.settings["SPIDER_MODULES"] == []  # Scrapy's, not this checkout's
    for name, value in default_values().items():
        if name not in ("CONCURRENT_REQUESTS", "REDIS_URL"):
            assert c.settings[name] == value, name
    assert "COMMANDS_MODULE" not in default_values() and "ADDONS" not in default_values()


def test_the_environment_beats_settings_py_but_not_a_spider_or_the_command_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("REDIS_URL", "redis://from-env:6379/0")
    monkeypatch.setenv("RETRY_TIMES", "7")
    monkeypatch.setenv("DOWNLOAD_TIMEOUT", "9")
    monkeypatch.delenv("DEPTH_LIMIT", raising=False)
    settings = Settings()
    settings.set("REDIS_URL", "redis://settings-py:6379/0", "project")
    settings.set("RETRY_TIMES", 1, "project")
    settings.set("RETRY_TIMES", 2, "spider")
    settings.set("DOWNLOAD_TIMEOUT", 3, "cmdline")
    apply_defaults(settings)
    assert settings["REDIS_URL"] == "redis://from-env:6379/0"
    assert settings.getpriority("REDIS_URL") == ENVIRONMENT_PRIORITY
    assert settings.getint("RETRY_TIMES") == 2
    assert settings.getint("DOWNLOAD_TIMEOUT") == 3
    # An unset variable leaves the default at the add-on's priority.
    assert settings.getpriority("DEPTH_LIMIT") == 15


def test_the_db_writer_and_monitor_read_the_project_they_run_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "someones_project"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "settings.py").write_text(
        'BOT_NAME = "someones_project"\nDB_WRITER_BATCH_SIZE = 7\nMONITOR_SPIDERS = "pages"\n'
    )
    (tmp_path / "scrapy.cfg").write_text("[settings]\ndefault = someones_project.settings\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("SCRAPY_SETTINGS_MODULE", "unset by the line below")
    monkeypatch.delenv("SCRAPY_SETTINGS_MODULE")
    monkeypatch.delenv("MONITOR_SPIDERS", raising=False)
    settings = project_settings({"LOG_LEVEL": "DEBUG"})
    assert settings["BOT_NAME"] == "someones_project"
    assert settings.getint("DB_WRITER_BATCH_SIZE") == 7
    assert settings["MONITOR_SPIDERS"] == "pages"
    assert settings["DB_WRITER_LOCK_TTL"] == defaults.DB_WRITER_LOCK_TTL  # the add-on's
    assert settings["LOG_LEVEL"] == "DEBUG"
    # Its components are a crawler's: the monitor never loads one.
    assert settings.getdict("DOWNLOADER_MIDDLEWARES") == {}


# --- refused, one line each -----------------------------------------------------------
def test_a_ported_scrapy_redis_settings_py_is_refused_saying_what_to_remove() -> None:
    with pytest.raises(Refused) as refused:
        crawler(
            Pages,
            {
                "SCHEDULER": "scrapy_redis.scheduler.Scheduler",
                "DUPEFILTER_CLASS": "scrapy_redis.dupefilter.RFPDupeFilter",
                "ITEM_PIPELINES": {"scrapy_redis.pipelines.RedisPipeline": 300},
            },
        )
    problems = refused.value.problems
    assert len(problems) == 3, problems
    assert problems[0].startswith("SCHEDULER = 'scrapy_redis.scheduler.Scheduler' is scrapy")
    assert "remove that line" in problems[0]
    assert problems[1].startswith("DUPEFILTER_CLASS = 'scrapy_redis.dupefilter.RFPDupeFilter'")
    assert problems[2].startswith("ITEM_PIPELINES has scrapy_redis.pipelines.RedisPipeline")
    assert all("\n" not in problem for problem in problems)


class Replacing:
    """Another add-on, after ours, that replaces the downloader middlewares."""

    def update_settings(self, settings: Settings) -> None:
        settings.set("DOWNLOADER_MIDDLEWARES", {f"{__name__}.UserAgent": 401}, "cmdline")


def test_a_list_replaced_after_the_merge_is_refused_and_the_guard_named() -> None:
    c = crawler(Pages, {"ADDONS": {"spiders_project.Addon": 0, f"{__name__}.Replacing": 1}})
    problems = start_problems(c.settings)
    assert len(problems) == 2, problems
    assert problems[0].startswith("DOWNLOADER_MIDDLEWARES lacks the cluster's ")
    assert GUARD not in problems[0] and ROBOTS in problems[0]
    assert problems[1].startswith(f"DOWNLOADER_MIDDLEWARES lacks the SSRF guard {GUARD}")


def test_a_crawl_of_ours_without_the_addon_is_refused_and_another_is_left_alone() -> None:
    c = get_crawler(Pages, {"DOWNLOAD_HANDLERS": {}})
    assert start_problems(c.settings) == [NOT_ENABLED]
    assert needs_addon(c.settings, Pages)
    assert not needs_addon(c.settings, Spider)
    assert start_problems(crawler(Pages).settings) == []


@pytest.mark.parametrize(
    "project",
    [
        {"TWISTED_DNS_RESOLVER": "scrapy.resolver.CachingThreadedResolver"},
        {
            "DOWNLOAD_HANDLERS": {
                "https": "scrapy_playwright.handler.ScrapyPlaywrightDownloadHandler"
            }
        },
        {"TWISTED_REACTOR": "twisted.internet.epollreactor.EPollReactor"},
        {"SPIDER_MIDDLEWARES": {"spiders_project.scope.seed_limits.SeedScope": None}},
    ],
)
def test_a_guard_or_reactor_replaced_by_a_setting_is_refused(project: dict[str, Any]) -> None:
    with pytest.raises(Refused) as refused:
        crawler(Pages, project)
    [problem] = refused.value.problems
    assert problem.startswith(next(iter(project)))


def test_a_subclass_of_the_guards_handler_or_resolver_is_its_part() -> None:
    from scrapy.core.downloader.handlers.http11 import HTTP11DownloadHandler

    from spiders_project.rendering.handler import RenderingDownloadHandler
    from spiders_project.scope.networks import GuardedResolver

    handler = type("OwnHandler", (RenderingDownloadHandler,), {})
    resolver = type("OwnResolver", (GuardedResolver,), {})
    c = crawler(Pages, {"DOWNLOAD_HANDLERS": {"https": handler}, "TWISTED_DNS_RESOLVER": resolver})
    assert start_problems(c.settings) == []
    with pytest.raises(Refused):
        crawler(Pages, {"DOWNLOAD_HANDLERS": {"https": HTTP11DownloadHandler}})


def test_the_guard_switched_off_by_name_or_setting_needs_none_of_its_parts() -> None:
    parts = {
        "TWISTED_DNS_RESOLVER": "scrapy.resolver.CachingThreadedResolver",
        "SPIDER_MIDDLEWARES": {"spiders_project.scope.seed_limits.SeedScope": None},
        "DOWNLOAD_HANDLERS": {"https": PLAYWRIGHT_HANDLER},
    }
    crawler(Pages, {**parts, "DOWNLOADER_MIDDLEWARES": {GUARD: None}})
    crawler(Pages, {**parts, "ALLOW_PRIVATE_NETWORKS": True})


def test_the_addon_can_be_applied_twice() -> None:
    c = crawler(OwnExtensions)
    again = c.settings.copy()
    again.frozen = False  # the crawler's are frozen once built
    Addon().update_settings(again)
    assert again.copy_to_dict() == c.settings.copy_to_dict()
