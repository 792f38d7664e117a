"""NodeHealthConfig: node health's settings, typed and checked."""

from __future__ import annotations

import pytest

from spiders_project.config import ConfigError, load_settings
from spiders_project.node_health.config import NodeHealthConfig


def test_the_project_defaults():
    config = NodeHealthConfig.from_settings(load_settings({}))
    assert config.enabled and config.failures == 50 and config.window == 30.0
    assert config.undecided_limit >= config.window


@pytest.mark.parametrize(
    ("overrides", "problem"),
    [
        ({"NODE_FAILURES": 0}, "^NODE_FAILURES="),
        ({"NODE_FAILURE_WINDOW": "soon"}, "^NODE_FAILURE_WINDOW="),
        ({"NODE_PROBE_INTERVAL": 0}, "^NODE_PROBE_INTERVAL="),
        ({"STATS_PUBLISH_ENABLED": False}, "^NODE_HEALTH_ENABLED="),
    ],
)
def test_a_bad_value_is_one_line_naming_its_setting(overrides, problem):
    with pytest.raises(ConfigError, match=problem):
        NodeHealthConfig.from_settings(load_settings(overrides))


def test_switched_off_it_needs_no_published_stats():
    config = NodeHealthConfig.from_settings(
        load_settings({"NODE_HEALTH_ENABLED": False, "STATS_PUBLISH_ENABLED": False})
    )
    assert not config.enabled
