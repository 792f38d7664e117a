"""worker/shutdown.py: the grace period a SIGTERM's drain gets, read and checked."""

from __future__ import annotations

import pytest

from spiders_project.config import ConfigError, load_settings
from spiders_project.worker.shutdown import ShutdownConfig


def test_the_grace_period_arrives_typed_from_text():
    assert ShutdownConfig.from_settings(load_settings()).grace == 30.0
    assert ShutdownConfig.from_settings(load_settings({"SHUTDOWN_GRACE_PERIOD": "5"})).grace == 5.0
    assert ShutdownConfig.from_settings(load_settings({"SHUTDOWN_GRACE_PERIOD": "0"})).grace == 0.0


@pytest.mark.parametrize("value", ["-1", "soon", "nan"])
def test_a_bad_grace_period_is_refused_with_the_setting_named(value):
    with pytest.raises(ConfigError, match="^SHUTDOWN_GRACE_PERIOD="):
        ShutdownConfig.from_settings(load_settings({"SHUTDOWN_GRACE_PERIOD": value}))
