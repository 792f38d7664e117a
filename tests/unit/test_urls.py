"""URL normalisation and trap bounds (scope/urls.py)."""

import pytest

from spiders_project.scope.urls import UrlRules
from spiders_project.spiders.distributed import DistributedSpider
from tests.support.crawlers import project_crawler

RULES = UrlRules(
    strip_exact=frozenset({"gclid", "fbclid", "mc_cid", "mc_eid"}),
    strip_prefixes=("utm_",),
    max_length=100,
    max_repeated_segments=3,
)


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://example.com/a?utm_source=x&id=3&utm_medium=y", "http://example.com/a?id=3"),
        ("http://example.com/a?gclid=1", "http://example.com/a"),
        ("http://example.com/a?fbclid=1&b=2&mc_cid=3&mc_eid=4", "http://example.com/a?b=2"),
        ("HTTP://Example.COM:80/Path?Q=1", "http://example.com/Path?Q=1"),
        ("https://example.com:443/", "https://example.com/"),
        ("https://example.com:8443/", "https://example.com:8443/"),
        ("http://bücher.example/x", "http://xn--bcher-kva.example/x"),
        ("http://user:pw@Example.com:80/", "http://user:pw@example.com/"),
        # A parameter that only starts like a stripped one is kept; order is kept.
        ("http://e.com/?z=1&utm=2&a=3", "http://e.com/?z=1&utm=2&a=3"),
        ("http://e.com/p#frag", "http://e.com/p#frag"),
    ],
)
def test_normalise(url, expected):
    assert RULES.normalise(url) == expected


def test_a_seed_can_keep_its_parameters():
    url = "http://example.com/a?utm_source=x"
    assert RULES.normalise(url, strip=False) == url


def test_already_normal_urls_come_back_as_the_same_string():
    url = "http://example.com/a?b=1"
    assert RULES.normalise(url) is url


@pytest.mark.parametrize(
    ("url", "trap"),
    [
        ("http://e.com/" + "a" * 100, "url_too_long"),
        ("http://e.com/a/b/a/b/a/b/a/b", "repeated_segments"),
        ("http://e.com/x/x/x/x", "repeated_segments"),
        ("http://e.com/a/b/a/b/a/b", None),
        ("http://e.com/2024/01/01/01", None),
        ("http://e.com/", None),
    ],
)
def test_traps(url, trap):
    assert RULES.trap(url) == trap


def test_settings_are_read_and_checked():
    crawler = project_crawler(DistributedSpider, {"URL_STRIP_PARAMS": "utm_*,ref"})
    rules = UrlRules.from_settings(crawler.settings)
    assert rules.strip_prefixes == ("utm_",) and rules.strip_exact == {"ref"}
    assert (rules.max_length, rules.max_repeated_segments) == (2083, 3)
