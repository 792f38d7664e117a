"""Delays per host: settings, the guard, what a site asks, a group's (politeness/delays.py)."""

from __future__ import annotations

import pytest

from spiders_project.config import ConfigError, load_settings
from spiders_project.politeness.delays import HostPoliteness


def politeness(**settings) -> HostPoliteness:
    return HostPoliteness.from_settings(load_settings(settings))


def test_delays_per_host_with_the_guard_and_what_sites_ask():
    p = politeness(
        DOWNLOAD_DELAY=0.5,
        HOST_DOWNLOAD_DELAYS={"Slow.Example:80": 2, "fast.example": 0},
        POLITENESS_GUARD=0.01,
    )
    assert p.delay_ms("other.example") == 500
    assert p.delay_ms("slow.example") == 2000, "hosts are compared in one spelling"
    assert p.gate_ms("fast.example") == 0, "no delay: the gate is not asked"
    assert p.gate_ms("other.example") == 510
    p.site_asked("other.example", 3000)  # robots.txt Crawl-delay: 3
    assert p.gate_ms("other.example") == 3010
    assert p.delay_ms("other.example") == 500, "the lease script reads the site's own from Redis"


@pytest.mark.parametrize(
    ("settings", "name"),
    [
        ({"DOWNLOAD_DELAY": -1}, "DOWNLOAD_DELAY"),
        ({"POLITENESS_GUARD": "soon"}, "POLITENESS_GUARD"),
        ({"HOST_DOWNLOAD_DELAYS": {"a.example": "slow"}}, "HOST_DOWNLOAD_DELAYS"),
        ({"HOST_DOWNLOAD_DELAYS": {"a.example": -2}}, "HOST_DOWNLOAD_DELAYS"),
    ],
)
def test_bad_delays_are_refused_with_the_setting_named(settings, name):
    with pytest.raises(ConfigError, match=f"^{name}="):
        politeness(**settings)


def test_delays_set_for_a_host_apply_to_its_group():
    settings = load_settings(
        {"POLITENESS_KEY": "domain", "HOST_DOWNLOAD_DELAYS": {"www.example.com": 2}}
    )
    politeness = HostPoliteness.from_settings(settings)
    assert politeness.key_of("http://img.example.com/a.png") == "example.com"
    assert politeness.delay_ms("example.com") == 2000
    with pytest.raises(ConfigError):
        HostPoliteness.from_settings(load_settings({"POLITENESS_KEY": "server"}))
