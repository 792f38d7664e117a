"""PacingConfig: the politeness middlewares' settings, typed and checked at start."""

from __future__ import annotations

import pytest

from spiders_project.config import ConfigError, load_settings
from spiders_project.politeness.config import PacingConfig


def test_the_project_defaults_and_text_from_the_environment():
    config = PacingConfig.from_settings(
        load_settings({"RETRY_AFTER_MAX": "120", "DOWNLOAD_TIMEOUT": "20"})
    )
    assert config.retry_after_max == 120.0
    assert config.navigation_guard >= 0 and config.robots_ttl > 0
    assert config.robots_lock_ms == 50_000  # the fetch's timeout plus 30 s


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("RETRY_AFTER_MAX", -1),
        ("NAVIGATION_GUARD", "soon"),
        ("ROBOTSTXT_TTL", 0),
        ("ROBOTSTXT_ERROR_TTL", -5),
        ("DOWNLOAD_TIMEOUT", 0),
    ],
)
def test_a_bad_value_is_one_line_naming_its_setting(setting, value):
    with pytest.raises(ConfigError, match=f"^{setting}="):
        PacingConfig.from_settings(load_settings({setting: value}))
