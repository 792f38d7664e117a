"""Every component's typed config, in-process: the project's defaults read, bad values named.

``tests/integration/test_config_errors.py`` checks that each entry point turns
these errors into one line and exit status 2; here each config object is
checked on its own, from the same settings ``scrapy crawl -s`` would give it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from scrapy.settings import BaseSettings

from monitor.config import MonitorConfig
from spiders_project.config import ConfigError, load_settings
from spiders_project.db_writer.writer import WriterConfig
from spiders_project.extensions.backpressure import BackpressureConfig
from spiders_project.extensions.heartbeat import StatsPublishConfig
from spiders_project.politeness.delays import HostPoliteness
from spiders_project.redis_connection import RedisConfig
from spiders_project.rendering.config import RenderConfig
from spiders_project.runtime.config import FrontierConfig
from spiders_project.runtime.seen import SeenConfig

READERS: list[Callable[[BaseSettings], Any]] = [
    FrontierConfig.from_settings,
    SeenConfig.from_settings,
    RedisConfig.from_settings,
    StatsPublishConfig.from_settings,
    BackpressureConfig.from_settings,
    WriterConfig.from_settings,
    MonitorConfig.from_settings,
    RenderConfig.from_settings,
    HostPoliteness.from_settings,
]


@pytest.mark.parametrize("read", READERS, ids=lambda r: r.__self__.__name__)
def test_the_project_defaults_are_valid(read):
    assert read(load_settings()) is not None


def test_values_arrive_typed_from_text_as_the_environment_gives_them():
    settings = load_settings(
        {
            "DB_WRITER_BATCH_SIZE": "250",
            "DB_WRITER_RETRY_BACKOFF": "0.5",
            "MONITOR_SPIDERS": " a, b ,a,",
            "MONITOR_PORT": "9500",
            "STATS_PUBLISH_INTERVAL": "2",
            "ITEM_BUFFER_MAX": "0",
        }
    )
    writer = WriterConfig.from_settings(settings)
    assert (writer.batch_size, writer.retry_backoff) == (250, 0.5)
    monitor = MonitorConfig.from_settings(settings)
    assert monitor.spiders == ("a", "b") and monitor.port == 9500
    assert StatsPublishConfig.from_settings(settings).interval == 2.0
    assert BackpressureConfig.from_settings(settings).limit == 0  # 0: no bound


@pytest.mark.parametrize(
    ("read", "overrides", "named"),
    [
        (WriterConfig.from_settings, {"DB_WRITER_BATCH_SIZE": "abc"}, "DB_WRITER_BATCH_SIZE"),
        (
            WriterConfig.from_settings,
            {"DB_WRITER_RETRY_BACKOFF_MAX": "0.01"},
            "DB_WRITER_RETRY_BACKOFF_MAX",
        ),
        (RedisConfig.from_settings, {"REDIS_URL": "nonsense"}, "REDIS_URL"),
        (RedisConfig.from_settings, {"REDIS_SOCKET_TIMEOUT": "0"}, "REDIS_SOCKET_TIMEOUT"),
        (MonitorConfig.from_settings, {"MONITOR_PORT": "70000"}, "MONITOR_PORT"),
        (MonitorConfig.from_settings, {"MONITOR_SPIDERS": " , "}, "MONITOR_SPIDERS"),
        (
            StatsPublishConfig.from_settings,
            {"STATS_HEARTBEAT_TTL": "1", "STATS_PUBLISH_INTERVAL": "5"},
            "STATS_HEARTBEAT_TTL",
        ),
        (BackpressureConfig.from_settings, {"ITEM_BUFFER_RESUME": "1.5"}, "ITEM_BUFFER_RESUME"),
        (RenderConfig.from_settings, {"RENDER_CONCURRENCY": "0"}, "RENDER_CONCURRENCY"),
        (FrontierConfig.from_settings, {"SEED_BATCH_SIZE": "-3"}, "SEED_BATCH_SIZE"),
        (RedisConfig.from_settings, {"REDIS_SENTINELS": "h1:26379,h2"}, "REDIS_SENTINELS"),
        (RedisConfig.from_settings, {"REDIS_SENTINELS": "h1:99999"}, "REDIS_SENTINELS"),
        (RedisConfig.from_settings, {"REDIS_WAIT_REPLICAS": "-1"}, "REDIS_WAIT_REPLICAS"),
        (RedisConfig.from_settings, {"REDIS_WAIT_TIMEOUT": "0"}, "REDIS_WAIT_TIMEOUT"),
        (SeenConfig.from_settings, {"RECRAWL_AFTER": "-5"}, "RECRAWL_AFTER"),
        (
            SeenConfig.from_settings,
            {"RECRAWL_AFTER": "60", "DUPEFILTER_MODE": "bloom"},
            "RECRAWL_AFTER",
        ),
    ],
)
def test_a_bad_value_is_refused_with_the_setting_named(read, overrides, named):
    with pytest.raises(ConfigError, match=f"^{named}="):
        read(load_settings(overrides))


def test_sentinels_and_recrawl_after_arrive_typed():
    settings = load_settings(
        {
            "REDIS_SENTINELS": "10.0.0.1:26379, [::1]:26380",
            "REDIS_WAIT_REPLICAS": "2",
            "RECRAWL_AFTER": "86400",
        }
    )
    redis_config = RedisConfig.from_settings(settings)
    assert redis_config.sentinels == (("10.0.0.1", 26379), ("::1", 26380))
    assert redis_config.wait_replicas == 2 and redis_config.sentinel_master == "mymaster"
    assert "sentinels 10.0.0.1:26379,::1:26380" in redis_config.where
    seen = SeenConfig.from_settings(settings)
    assert seen.timed and seen.spec == "timed 5400000"


def test_a_password_in_a_bad_redis_url_is_never_shown():
    with pytest.raises(ConfigError) as refused:
        RedisConfig.from_settings(load_settings({"REDIS_URL": "redis://:s3cret@host:port/0"}))
    assert "s3cret" not in str(refused.value) and str(refused.value).startswith("REDIS_URL=")
