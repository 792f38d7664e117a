"""The bundled spider (spiders/distributed.py): it follows the links of its seed's host."""

from __future__ import annotations

import pytest
from scrapy import Request
from scrapy.http import HtmlResponse

from spiders_project.crawl.meta import JOB
from spiders_project.items import PageItem
from spiders_project.spiders.distributed import DistributedSpider
from tests.support.crawlers import NEVER_CONNECTS, project_crawler


@pytest.fixture
def spider() -> DistributedSpider:
    """The spider as ``scrapy crawl`` builds it; its Redis client never connects here."""
    crawler = project_crawler(DistributedSpider, {"REDIS_URL": NEVER_CONNECTS})
    return DistributedSpider.from_crawler(crawler)


def test_an_idn_seed_keeps_crawling_past_its_first_page(spider: DistributedSpider) -> None:
    seed = spider.make_request_from_data("http://bücher.example:8080/".encode())
    assert "scope" not in seed.meta  # its own host: the default
    # Scrapy hands the spider the punycode form of the URL it fetched.
    response = HtmlResponse(
        seed.url,
        body="<html><title>T</title>"
        "<a href='/next'>n</a>"
        "<a href='http://bücher.example:8080/u'>u</a>"
        "<a href='http://user@XN--BCHER-KVA.example:8080/v'>v</a>"
        "<a href='http://bücher.example/'>other port</a>"
        "<a href='http://other.example/'>o</a></html>".encode(),
        headers={"Content-Type": "text/html; charset=utf-8"},
        request=seed,
    )
    assert response.url == "http://xn--bcher-kva.example:8080/"
    out = list(spider.parse(response))
    assert [type(o) for o in out[:1]] == [PageItem]
    followed = [r for r in out if isinstance(r, Request)]
    assert [Request(r.url).url for r in followed] == [
        "http://xn--bcher-kva.example:8080/next",
        "http://xn--bcher-kva.example:8080/u",
        "http://user@xn--bcher-kva.example:8080/v",
    ]
    assert all("scope" not in r.meta for r in followed)  # each one's own host


def test_a_seeds_job_goes_into_its_requests_meta(spider: DistributedSpider) -> None:
    seed = spider.make_request_from_data(b'{"url": "http://h/", "job": "nightly"}')
    assert seed.meta[JOB] == "nightly"
    # The job "default" travels as nothing, and only a seed's "job" names one.
    plain = spider.make_request_from_data(b'{"url": "http://h/", "meta": {"crawl_job": "x"}}')
    assert JOB not in plain.meta
