"""The item buffer's bound (item_buffer/backpressure.py): its defaults read, a bad value named."""

from __future__ import annotations

import pytest

from spiders_project.config import ConfigError, load_settings
from spiders_project.item_buffer.backpressure import BackpressureConfig


def test_a_bad_value_is_refused_with_the_setting_named():
    with pytest.raises(ConfigError, match="^ITEM_BUFFER_RESUME="):
        BackpressureConfig.from_settings(load_settings({"ITEM_BUFFER_RESUME": "1.5"}))
