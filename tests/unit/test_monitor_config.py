"""The monitor's typed config (monitor/config.py): the project's defaults read, bad values named."""

from __future__ import annotations

import pytest

from monitor.config import MonitorConfig
from spiders_project.config import ConfigError, load_settings


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        ({"MONITOR_PORT": "70000"}, "MONITOR_PORT"),
        ({"MONITOR_SPIDERS": " , "}, "MONITOR_SPIDERS"),
    ],
)
def test_a_bad_value_is_refused_with_the_setting_named(overrides, named):
    with pytest.raises(ConfigError, match=f"^{named}="):
        MonitorConfig.from_settings(load_settings(overrides))
