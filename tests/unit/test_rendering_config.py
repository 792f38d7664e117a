"""Rendering's typed config (rendering/config.py): the defaults read, a bad value named."""

from __future__ import annotations

import pytest

from spiders_project.config import ConfigError, load_settings
from spiders_project.rendering.config import RenderConfig


def test_a_bad_value_is_refused_with_the_setting_named():
    with pytest.raises(ConfigError, match="^RENDER_CONCURRENCY="):
        RenderConfig.from_settings(load_settings({"RENDER_CONCURRENCY": "0"}))
