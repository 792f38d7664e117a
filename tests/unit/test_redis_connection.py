"""The Redis connection's typed config (redis_connection.py): defaults read, bad values named."""

from __future__ import annotations

import pytest

from spiders_project.config import ConfigError, load_settings
from spiders_project.redis_connection import RedisConfig


def test_the_project_defaults_are_valid():
    assert RedisConfig.from_settings(load_settings()) is not None


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        ({"REDIS_URL": "nonsense"}, "REDIS_URL"),
        ({"REDIS_SOCKET_TIMEOUT": "0"}, "REDIS_SOCKET_TIMEOUT"),
        ({"REDIS_SENTINELS": "h1:26379,h2"}, "REDIS_SENTINELS"),
        ({"REDIS_SENTINELS": "h1:99999"}, "REDIS_SENTINELS"),
        ({"REDIS_WAIT_REPLICAS": "-1"}, "REDIS_WAIT_REPLICAS"),
        ({"REDIS_WAIT_TIMEOUT": "0"}, "REDIS_WAIT_TIMEOUT"),
    ],
)
def test_a_bad_value_is_refused_with_the_setting_named(overrides, named):
    with pytest.raises(ConfigError, match=f"^{named}="):
        RedisConfig.from_settings(load_settings(overrides))


def test_sentinels_arrive_typed():
    settings = load_settings(
        {
            "REDIS_SENTINELS": "10.0.0.1:26379, [::1]:26380",
            "REDIS_WAIT_REPLICAS": "2",
        }
    )
    redis_config = RedisConfig.from_settings(settings)
    assert redis_config.sentinels == (("10.0.0.1", 26379), ("::1", 26380))
    assert redis_config.wait_replicas == 2 and redis_config.sentinel_master == "mymaster"
    assert "sentinels 10.0.0.1:26379,::1:26380" in redis_config.where


def test_a_password_in_a_bad_redis_url_is_never_shown():
    with pytest.raises(ConfigError) as refused:
        RedisConfig.from_settings(load_settings({"REDIS_URL": "redis://:s3cret@host:port/0"}))
    assert "s3cret" not in str(refused.value) and str(refused.value).startswith("REDIS_URL=")
