"""The seen-set's typed config (frontier/seen.py): the project's defaults read, bad values named."""

from __future__ import annotations

import pytest

from spiders_project.config import ConfigError, load_settings
from spiders_project.frontier.seen import SeenConfig


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        ({"RECRAWL_AFTER": "-5"}, "RECRAWL_AFTER"),
        ({"RECRAWL_AFTER": "60", "DUPEFILTER_MODE": "bloom"}, "RECRAWL_AFTER"),
    ],
)
def test_a_bad_value_is_refused_with_the_setting_named(overrides, named):
    with pytest.raises(ConfigError, match=f"^{named}="):
        SeenConfig.from_settings(load_settings(overrides))


def test_recrawl_after_arrives_typed():
    settings = load_settings({"RECRAWL_AFTER": "86400"})
    seen = SeenConfig.from_settings(settings)
    assert seen.timed and seen.spec == "timed 5400000"
