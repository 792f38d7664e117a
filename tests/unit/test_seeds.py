"""A seed as written to the start URLs key: a URL or JSON, with its limits (seeds.py)."""

import pytest

from spiders_project.crawl.meta import JOB, job_of
from spiders_project.scope.seeds import DEFAULT_JOB, InvalidSeed, Seed, parse_seed


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


def test_a_seed_names_its_job_and_without_one_belongs_to_default():
    assert parse_seed(b'{"url": "http://h/", "job": "shop-x_2026.11"}').job == "shop-x_2026.11"
    assert parse_seed(b'{"url": "http://h/"}').job == DEFAULT_JOB == "default"
    assert parse_seed(b"http://h/").job == DEFAULT_JOB
    assert parse_seed(("{" + f'"url": "http://h/", "job": "{"j" * 64}"' + "}").encode()).job


@pytest.mark.parametrize(
    "job",
    ['""', '"a b"', '"a/b"', '"a:b"', '"x\\n"', f'"{"j" * 65}"', "3", "null", '"é"', "[]"],
)
def test_a_bad_job_id_rejects_the_seed_with_its_reason(job):
    with pytest.raises(InvalidSeed, match="job must be 1-64 letters"):
        parse_seed(("{" + f'"url": "http://h/", "job": {job}' + "}").encode())


def test_job_of_a_request_meta():
    assert job_of({JOB: "nightly"}) == "nightly"
    assert job_of({}) == DEFAULT_JOB


def test_seeds_with_one_scope_id_and_the_same_limits_share_one_budget():
    def scope_id(raw: str) -> str:
        return parse_seed(raw.encode()).scope["id"]

    one = scope_id('{"url": "http://a/", "max_pages": 50, "scope_id": "job.j.1"}')
    two = scope_id('{"url": "http://b/", "scope_id": "job.j.1", "max_pages": 50}')
    assert one == two and one.startswith("job.j.1.")
    # Other limits, another id: a worker keeps one budget mark and one set of
    # patterns per id, so seeds disagreeing on their limits never share one.
    assert scope_id('{"url": "http://a/", "max_pages": 9, "scope_id": "job.j.1"}') != one
    # Without a scope_id, each seed's limits are its own.
    assert scope_id('{"url": "http://a/", "max_pages": 50}') != scope_id(
        '{"url": "http://b/", "max_pages": 50}'
    )
    # A scope_id without limits names nothing.
    assert parse_seed(b'{"url": "http://a/", "scope_id": "x"}').scope == {}
    for bad in ('"a b"', '""', "7", f'"{"x" * 101}"'):
        with pytest.raises(InvalidSeed, match="scope_id"):
            parse_seed(
                ("{" + f'"url": "http://a/", "max_pages": 1, "scope_id": {bad}' + "}").encode()
            )
