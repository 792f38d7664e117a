"""A seed as written to the start URLs key: a URL or JSON, with its limits (seeds.py)."""

import pytest

from spiders_project.seeds import InvalidSeed, Seed, parse_seed


def test_plain_url():
    assert parse_seed(b"https://example.com/a?b=1") == Seed("https://example.com/a?b=1")


def test_plain_url_surrounding_whitespace_is_trimmed():
    assert parse_seed(b"  http://example.com/\n").url == "http://example.com/"


def test_json_with_meta_and_priority():
    seed = parse_seed(b'{"url": "http://h:81/x", "meta": {"playwright": true}, "priority": 5}')
    assert seed == Seed("http://h:81/x", {"playwright": True}, 5)


def test_a_seeds_own_recrawl_after_goes_with_its_limits():
    seed = parse_seed(b'{"url": "http://h/", "recrawl_after": 3600}')
    assert seed.scope["recrawl_after"] == 3600 and seed.scope["id"]


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"not a url", "whitespace"),
        (b"example.com/page", "scheme"),
        (b"ftp://example.com/", "scheme"),
        (b"javascript:alert(1)", "scheme"),
        (b"http:///nohost", "no host"),
        (b"http://h:notaport/", "not a URL"),
        (b'{"url": "http://h/"', "invalid JSON"),
        (b'{"meta": {}}', "non-empty string"),
        (b'{"url": "http://h/", "meta": []}', "meta"),
        (b'{"url": "http://h/", "priority": "high"}', "priority"),
        (b'{"url": "http://h/", "recrawl_after": "1d"}', "recrawl_after"),
        (b'{"url": "http://h/", "recrawl_after": -1}', "recrawl_after"),
        (b'{"url": "http://h/", "recrawl_after": true}', "recrawl_after"),
        (b"\xff\xfe", "UTF-8"),
        (b"", "non-empty"),
    ],
)
def test_invalid_seeds_say_why(raw, reason):
    with pytest.raises(InvalidSeed, match=reason):
        parse_seed(raw)


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


def test_sitemap_seeds():
    assert parse_seed(b'{"url": "http://h/sitemap.xml", "sitemap": true}').sitemap is True
    assert parse_seed(b"http://h/sitemap.xml").sitemap is False
    with pytest.raises(InvalidSeed):
        parse_seed(b'{"url": "http://h/", "sitemap": "yes"}')
