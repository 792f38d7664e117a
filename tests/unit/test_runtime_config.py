"""The frontier's typed config (frontier/config.py): the defaults read, a bad value named."""

from __future__ import annotations

import pytest

from spiders_project.config import ConfigError, load_settings
from spiders_project.frontier.config import FrontierConfig


def test_a_bad_value_is_refused_with_the_setting_named():
    with pytest.raises(ConfigError, match="^SEED_BATCH_SIZE="):
        FrontierConfig.from_settings(load_settings({"SEED_BATCH_SIZE": "-3"}))
