"""The project's defaults, as each typed config reads them.

Every config is built by its ``from_settings`` from ``spiders_project/settings.py``
as declared (executed afresh with no environment variable set), and each field
that comes from a setting must hold that setting's declared value: a default
that does not parse, a reader that reads another setting or the wrong type, or
a field left to its dataclass default instead of the setting all fail here.
Every attribute of a config is either checked or named in ``derived`` (a
value computed from several settings, or runtime state), so a new field cannot
go unchecked by accident.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from operator import attrgetter
from types import ModuleType
from typing import Any, get_type_hints
from unittest import mock

import pytest
from scrapy.settings import BaseSettings, Settings

import spiders_project.settings as project_settings
from monitor.config import MonitorConfig
from spiders_project.db_writer.writer import WriterConfig
from spiders_project.frontier.config import FrontierConfig
from spiders_project.frontier.seen import SeenConfig
from spiders_project.item_buffer.backpressure import BackpressureConfig
from spiders_project.politeness.delays import HostPoliteness
from spiders_project.redis_access.connection import RedisConfig
from spiders_project.rendering.config import RenderConfig, parse_rules
from spiders_project.worker.heartbeat import StatsPublishConfig

Convert = Callable[[Any], Any]


def declared_settings() -> ModuleType:
    """``spiders_project/settings.py`` run again with an empty environment: the
    values its file declares, whatever the environment of the test run holds."""
    spec = importlib.util.spec_from_file_location("declared_settings", project_settings.__file__)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    with mock.patch.dict(os.environ, clear=True):
        spec.loader.exec_module(module)
    return module


DECLARED = declared_settings()


def milliseconds(seconds: float) -> int:
    return round(seconds * 1000)


def host_ports(text: str) -> tuple[tuple[str, int], ...]:
    pairs = (part.strip().rpartition(":") for part in text.split(",") if part.strip())
    return tuple((host, int(port)) for host, _, port in pairs)


def true_text(value: Any) -> bool:
    return str(value).strip().lower() in ("1", "true")


def comma_list(value: Any) -> tuple[str, ...]:
    names = value.split(",") if isinstance(value, str) else value
    return tuple(name.strip() for name in names if name.strip())


@dataclass(frozen=True)
class Case:
    """``build`` turns the settings into the config; ``fields`` maps an attribute
    (dotted for a nested one) to its setting, or to the setting and how its
    declared value becomes the attribute's."""

    build: Callable[[BaseSettings], object]
    fields: Mapping[str, str | tuple[str, Convert]]
    derived: frozenset[str] = field(default_factory=frozenset)


CASES = {
    "WriterConfig": Case(
        WriterConfig.from_settings,
        {
            "batch_size": "DB_WRITER_BATCH_SIZE",
            "max_wait": "DB_WRITER_MAX_WAIT",
            "idle_wait": "DB_WRITER_IDLE_WAIT",
            "retry_backoff": "DB_WRITER_RETRY_BACKOFF",
            "retry_backoff_max": "DB_WRITER_RETRY_BACKOFF_MAX",
            "lock_ttl": "DB_WRITER_LOCK_TTL",
            "tables": "ITEM_TABLES",
            "spiders_poll": "DB_WRITER_SPIDERS_POLL",
        },
    ),
    "RenderConfig": Case(
        RenderConfig.from_settings,
        {
            "enabled": "RENDER_ENABLED",
            "rules": ("RENDER_URL_PATTERNS", parse_rules),
            "wait_until": "RENDER_WAIT_UNTIL",
            "timeout": "RENDER_TIMEOUT",
            "idle_timeout": "RENDER_IDLE_TIMEOUT",
            "deadline": "RENDER_DEADLINE",
            "concurrency": "RENDER_CONCURRENCY",
            "pages_per_context": "RENDER_PAGES_PER_CONTEXT",
            "pages_per_browser": "RENDER_PAGES_PER_BROWSER",
            "block_resource_types": ("RENDER_BLOCK_RESOURCE_TYPES", frozenset),
            "block_domains": ("RENDER_BLOCK_DOMAINS", tuple),
            "crash_retries": "RENDER_CRASH_RETRIES",
            "mode": "RENDER_MODE",
            "auto_rules": ("RENDER_AUTO_RULES", parse_rules),
            "auto_learn": "RENDER_AUTO_LEARN",
            "max_rss_mb": "RENDER_MAX_RSS_MB",
            "slowdown": "RENDER_SLOWDOWN_FACTOR",
            "urls_per_page": "RENDER_URLS_PER_PAGE",
            "idle_page_close": "RENDER_IDLE_PAGE_CLOSE",
            "gc_between_urls": "RENDER_GC_BETWEEN_URLS",
            "images_unloaded": "RENDER_IMAGES_UNLOADED",
            "driver_node_options": "RENDER_DRIVER_NODE_OPTIONS",
        },
    ),
    "HostPoliteness": Case(
        HostPoliteness.from_settings,
        {
            "default_ms": ("DOWNLOAD_DELAY", milliseconds),
            "overrides_ms": (
                "HOST_DOWNLOAD_DELAYS",
                lambda delays: {host: milliseconds(d) for host, d in delays.items()},
            ),
            "guard_ms": ("POLITENESS_GUARD", milliseconds),
            "groups.mode": "POLITENESS_KEY",
        },
        # The operator's steering and the sites' Crawl-delay: runtime, not settings.
        derived=frozenset({"groups", "steered", "asked_ms"}),
    ),
    "FrontierConfig": Case(
        FrontierConfig.from_settings,
        {
            "concurrency": "CONCURRENT_REQUESTS",
            "per_host": "CONCURRENT_REQUESTS_PER_DOMAIN",
            "prefetch": "FRONTIER_PREFETCH",
            "spares": "FRONTIER_SPARES",
            "lease_timeout": "FRONTIER_LEASE_TIMEOUT",
            "close_timeout": "FRONTIER_CLOSE_TIMEOUT",
            "flush_interval": "FRONTIER_FLUSH_INTERVAL",
            "empty_poll_interval": "FRONTIER_EMPTY_POLL_INTERVAL",
            "seen_cache": "FRONTIER_SEEN_CACHE",
            "persist": "SCHEDULER_PERSIST",
            "flush_on_start": "SCHEDULER_FLUSH_ON_START",
            "seed_batch_size": "SEED_BATCH_SIZE",
            "seed_spread": "SEED_SPREAD",
            "seed_poll_interval": "SEED_POLL_INTERVAL",
            "max_idle_time": "MAX_IDLE_TIME_BEFORE_CLOSE",
            "role": "WORKER_ROLE",
        },
    ),
    "StatsPublishConfig": Case(
        StatsPublishConfig.from_settings,
        {
            "interval": "STATS_PUBLISH_INTERVAL",
            "heartbeat_ttl": "STATS_HEARTBEAT_TTL",
            "worker_retention": "STATS_WORKER_RETENTION",
            "samples_retention": "STATS_SAMPLES_RETENTION",
            "history_interval": "STATS_HISTORY_INTERVAL",
            "history_retention": "STATS_HISTORY_RETENTION",
        },
    ),
    "RedisConfig": Case(
        RedisConfig.from_settings,
        {
            "url": "REDIS_URL",
            "socket_timeout": "REDIS_SOCKET_TIMEOUT",
            "backoff": "REDIS_RECONNECT_BACKOFF",
            "backoff_max": "REDIS_RECONNECT_BACKOFF_MAX",
            "sentinels": ("REDIS_SENTINELS", host_ports),
            "sentinel_master": "REDIS_SENTINEL_MASTER",
            "wait_replicas": "REDIS_WAIT_REPLICAS",
            "wait_timeout": "REDIS_WAIT_TIMEOUT",
            "cluster": ("REDIS_CLUSTER", true_text),
            "sentinel_access.username": "REDIS_SENTINEL_USERNAME",
            "sentinel_access.password": "REDIS_SENTINEL_PASSWORD",
        },
        # TLS to the sentinels follows REDIS_SENTINEL_TLS and the URL's scheme.
        derived=frozenset({"sentinel_access"}),
    ),
    "SeenConfig": Case(
        SeenConfig.from_settings,
        {
            "mode": "DUPEFILTER_MODE",
            "capacity": "DUPEFILTER_CAPACITY",
            "error_rate": "DUPEFILTER_ERROR_RATE",
            "recrawl_after": "RECRAWL_AFTER",
        },
    ),
    "MonitorConfig": Case(
        MonitorConfig.from_settings,
        {
            "host": "MONITOR_HOST",
            "port": "MONITOR_PORT",
            "spiders": ("MONITOR_SPIDERS", comma_list),
            "redis_timeout": "MONITOR_REDIS_TIMEOUT",
            "worker_retention": "STATS_WORKER_RETENTION",
        },
    ),
    "BackpressureConfig": Case(
        BackpressureConfig.from_settings,
        {
            "limit": "ITEM_BUFFER_MAX",
            "resume": "ITEM_BUFFER_RESUME",
            "check_interval": "ITEM_BUFFER_CHECK_INTERVAL",
            "paused_check_interval": "ITEM_BUFFER_PAUSED_CHECK_INTERVAL",
        },
    ),
}


@pytest.fixture
def settings() -> Settings:
    """The project's settings as declared, at the priority ``load_settings`` gives them."""
    built = Settings()
    built.setmodule(DECLARED, priority="project")
    return built


def declared(setting: str, convert: Convert | None) -> Any:
    assert hasattr(DECLARED, setting), f"{setting} is not declared in settings.py"
    value = getattr(DECLARED, setting)
    return value if convert is None else convert(value)


@pytest.mark.parametrize("name", list(CASES))
def test_each_config_holds_the_declared_defaults(name: str, settings: Settings) -> None:
    case = CASES[name]
    config = case.build(settings)
    hints = get_type_hints(type(config))
    for attribute, source in case.fields.items():
        setting, convert = (source, None) if isinstance(source, str) else source
        actual = attrgetter(attribute)(config)
        expected = declared(setting, convert)
        assert actual == expected, f"{name}.{attribute}: {actual!r}, {setting}={expected!r}"
        hint = hints.get(attribute)
        if hint in (bool, int, float, str):
            assert type(actual) is hint, f"{name}.{attribute}: {actual!r} is not a {hint}"
    unchecked = set(vars(config)) - {a.split(".")[0] for a in case.fields} - case.derived
    assert not unchecked, f"{name}: no row for {sorted(unchecked)}"
