"""URL normalisation, trap bounds and a seed's own limits (spiders_project.scope)."""

import pytest
from scrapy import Request
from scrapy.http import HtmlResponse
from scrapy.statscollectors import StatsCollector

from spiders_project.meta import SCOPE_META
from spiders_project.scope.seed_limits import SeedScope
from spiders_project.scope.urls import UrlRules
from spiders_project.seeds import InvalidSeed, parse_seed
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


def test_seed_limits_are_parsed_and_checked():
    seed = parse_seed(
        b'{"url": "http://h/", "max_pages": 5, "max_depth": 2, "allow": "/docs/",'
        b' "deny": ["print"], "strip_params": false}'
    )
    scope = dict(seed.scope)
    assert len(scope.pop("id")) == 16
    assert scope == {
        "max_pages": 5,
        "max_depth": 2,
        "allow": ["/docs/"],
        "deny": ["print"],
        "strip_params": False,
    }
    assert parse_seed(b'{"url": "http://h/"}').scope == {}
    for bad in (
        b'{"url": "http://h/", "max_pages": 0}',
        b'{"url": "http://h/", "max_depth": "3"}',
        b'{"url": "http://h/", "allow": ["("]}',
        b'{"url": "http://h/", "deny": 3}',
        b'{"url": "http://h/", "strip_params": "no"}',
    ):
        with pytest.raises(InvalidSeed):
            parse_seed(bad)


def test_seed_scope_passes_limits_to_links_and_applies_them():
    crawler = project_crawler(DistributedSpider)
    crawler.stats = crawler.stats or StatsCollector(crawler)
    middleware = SeedScope(crawler)
    scope = {"id": "s1", "max_depth": 1, "allow": ["/docs/"], "deny": ["print"]}
    response = HtmlResponse(
        "http://h/docs/", request=Request("http://h/docs/", meta={SCOPE_META: scope})
    )

    def link(url, depth=1):
        return middleware.get_processed_request(Request(url, meta={"depth": depth}), response)

    kept = link("http://h/docs/a")
    assert kept is not None and kept.meta[SCOPE_META] is scope
    assert link("http://h/blog/") is None
    assert link("http://h/docs/a?print=1") is None
    assert link("http://h/docs/b", depth=2) is None
    middleware.budgets.spent.add("s1")
    assert link("http://h/docs/c") is None
    # A link from a page without limits stays without.
    plain = HtmlResponse("http://h/", request=Request("http://h/"))
    other = middleware.get_processed_request(Request("http://h/x"), plain)
    assert other is not None and SCOPE_META not in other.meta


def test_sitemap_seeds():
    assert parse_seed(b'{"url": "http://h/sitemap.xml", "sitemap": true}').sitemap is True
    assert parse_seed(b"http://h/sitemap.xml").sitemap is False
    with pytest.raises(InvalidSeed):
        parse_seed(b'{"url": "http://h/", "sitemap": "yes"}')
