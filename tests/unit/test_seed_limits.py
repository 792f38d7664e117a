"""A seed's own limits, passed to its links and applied to them (scope/seed_limits.py)."""

from scrapy import Request
from scrapy.http import HtmlResponse
from scrapy.statscollectors import StatsCollector

from spiders_project.crawl.meta import JOB, SCOPE_META
from spiders_project.scope.seed_limits import SeedScope
from spiders_project.spiders.distributed import DistributedSpider
from tests.support.crawlers import project_crawler


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


def test_seed_scope_gives_a_pages_job_to_its_links():
    crawler = project_crawler(DistributedSpider)
    crawler.stats = crawler.stats or StatsCollector(crawler)
    middleware = SeedScope(crawler)
    page = HtmlResponse("http://h/", request=Request("http://h/", meta={JOB: "nightly"}))
    link = middleware.get_processed_request(Request("http://h/a"), page)
    assert link is not None and link.meta[JOB] == "nightly"
    # A link that names its own job keeps it.
    own = middleware.get_processed_request(Request("http://h/b", meta={JOB: "other"}), page)
    assert own is not None and own.meta[JOB] == "other"
    # The job "default" travels as nothing at all.
    plain = HtmlResponse("http://h/", request=Request("http://h/"))
    link = middleware.get_processed_request(Request("http://h/c"), plain)
    assert link is not None and JOB not in link.meta
