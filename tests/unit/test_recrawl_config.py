"""RecrawlConfig: the revisit settings checked, and the adaptive interval's arithmetic."""

from __future__ import annotations

import pytest
from scrapy.settings import Settings

from spiders_project import settings as project_settings
from spiders_project.config import ConfigError
from spiders_project.recrawl.config import RecrawlConfig


def config(**overrides: object) -> RecrawlConfig:
    settings = Settings()
    settings.setmodule(project_settings)
    settings.update(overrides)
    return RecrawlConfig.from_settings(settings)


def test_defaults_revisit_nothing_and_keep_no_pages():
    got = config()
    assert (got.after, got.adaptive, got.pages, got.revisits) == (0.0, False, False, False)
    assert (got.dec_rate, got.inc_rate) == (0.2, 0.4)


def test_links_bring_urls_back_only_when_switched_on():
    assert not config().links
    assert config(RECRAWL_LINKS="true").links


def test_recrawl_after_turns_the_pages_table_on():
    assert config(RECRAWL_AFTER="30").pages
    assert config(PAGES_ENABLED="true").pages
    assert not config(PAGES_ENABLED="true").revisits


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        ({"RECRAWL_ADAPTIVE": "true"}, "RECRAWL_ADAPTIVE"),
        ({"RECRAWL_DEC_RATE": "1"}, "RECRAWL_DEC_RATE"),
        ({"RECRAWL_INC_RATE": "-0.1"}, "RECRAWL_INC_RATE"),
        ({"RECRAWL_MIN_INTERVAL": "0"}, "RECRAWL_MIN_INTERVAL"),
        ({"RECRAWL_MIN_INTERVAL": "100", "RECRAWL_MAX_INTERVAL": "10"}, "RECRAWL_MAX_INTERVAL"),
        ({"RECRAWL_ADAPTIVE": "maybe"}, "RECRAWL_ADAPTIVE"),
    ],
)
def test_bad_values_are_one_line_naming_the_setting(overrides, named):
    with pytest.raises(ConfigError, match=f"^{named}="):
        config(**overrides)
