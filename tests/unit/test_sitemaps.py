"""spiders/sitemaps.py: where a seed that is no sitemap finds its robots.txt, read and checked."""

from __future__ import annotations

import pytest

from spiders_project.config import ConfigError, load_settings
from spiders_project.spiders.sitemaps import SitemapConfig


def test_robots_obeyed_means_the_cluster_s_shared_copy():
    assert SitemapConfig.from_settings(load_settings()).shared_robots
    off = load_settings({"ROBOTSTXT_OBEY": "false"})
    assert not SitemapConfig.from_settings(off).shared_robots


def test_a_bad_switch_is_refused_with_the_setting_named():
    with pytest.raises(ConfigError, match="^ROBOTSTXT_OBEY="):
        SitemapConfig.from_settings(load_settings({"ROBOTSTXT_OBEY": "sometimes"}))
