"""worker/heartbeat.py: the stats publisher's settings, read and checked.

Publishing against a real Redis is in tests/integration/test_monitor.py.
"""

from __future__ import annotations

import pytest
from scrapy import Spider
from scrapy.exceptions import NotConfigured
from scrapy.utils.test import get_crawler

from spiders_project.config import ConfigError, load_settings
from spiders_project.read_model import contract
from spiders_project.worker.heartbeat import StatsPublishConfig, StatsPublisher, publish_script


class _Spider(Spider):
    name = "t"


def test_the_switch_arrives_typed_from_text():
    assert StatsPublishConfig.enabled_in(load_settings())
    assert not StatsPublishConfig.enabled_in(load_settings({"STATS_PUBLISH_ENABLED": "false"}))
    assert StatsPublishConfig.enabled_in(load_settings({"STATS_PUBLISH_ENABLED": "1"}))


def test_a_bad_switch_is_refused_with_the_setting_named():
    with pytest.raises(ConfigError, match="^STATS_PUBLISH_ENABLED="):
        StatsPublishConfig.enabled_in(load_settings({"STATS_PUBLISH_ENABLED": "maybe"}))


def test_off_the_publisher_is_not_built_and_the_stats_settings_go_unread():
    settings = {"STATS_PUBLISH_ENABLED": False, "STATS_PUBLISH_INTERVAL": "never"}
    with pytest.raises(NotConfigured):
        StatsPublisher.from_crawler(get_crawler(_Spider, settings))


def test_a_heartbeat_shorter_than_the_interval_is_refused_with_the_setting_named():
    overrides = {"STATS_HEARTBEAT_TTL": "1", "STATS_PUBLISH_INTERVAL": "5"}
    with pytest.raises(ConfigError, match="^STATS_HEARTBEAT_TTL="):
        StatsPublishConfig.from_settings(load_settings(overrides))


def test_the_publish_script_spells_no_field_name_the_contract_gives_it():
    """The hash's own fields, the pages counter and the states are named in
    read_model/contract.py only: the script gets them as arguments (what it
    writes under those names: tests/integration/test_monitor.py)."""
    source = publish_script().source
    names = (
        contract.WORKER_FIELD,
        contract.RUN_FIELD,
        contract.STATE_FIELD,
        contract.LAST_SEEN_FIELD,
        contract.PAGES,
        contract.RUNNING,
        contract.CLOSED,
    )
    for name in names:
        assert f"'{name}'" not in source and f'"{name}"' not in source, name
