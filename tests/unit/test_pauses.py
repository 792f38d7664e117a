"""EnginePauses: the engine runs again only once every holder let go."""

from __future__ import annotations

import warnings

from scrapy.core.engine import ExecutionEngine
from scrapy.exceptions import ScrapyDeprecationWarning

from spiders_project.plumbing.pauses import EnginePauses
from spiders_project.spiders.distributed import DistributedSpider
from tests.support.crawlers import NEVER_CONNECTS, project_crawler


def crawler_with_engine():
    """A crawler with Scrapy's real engine, not started (nothing is crawled)."""
    crawler = project_crawler(DistributedSpider, {"REDIS_URL": NEVER_CONNECTS})
    with warnings.catch_warnings():
        # project_crawler copies every setting, Scrapy's deprecated
        # RANDOMIZE_DOWNLOAD_DELAY default among them, which the downloader flags.
        warnings.simplefilter("ignore", ScrapyDeprecationWarning)
        crawler.engine = ExecutionEngine(crawler, lambda _: None)
    return crawler


def test_one_holder_releasing_does_not_resume_for_another():
    crawler = crawler_with_engine()
    pauses = EnginePauses.of(crawler)
    pauses.hold("backpressure")
    pauses.hold("node health")
    assert crawler.engine.paused and pauses.held
    pauses.release("backpressure")
    assert crawler.engine.paused  # node health still holds it
    pauses.release("node health")
    assert not crawler.engine.paused and not pauses.held


def test_a_long_pause_asks_for_unstarted_leases_back():
    crawler = crawler_with_engine()
    pauses = EnginePauses.of(crawler)
    asked = []
    pauses.given_back.subscribe(lambda: asked.append(True))
    pauses.hold("backpressure")
    assert asked == []
    pauses.hold("node health", give_back=True)
    assert asked == [True]


def test_before_the_crawl_starts_there_is_no_engine_to_pause():
    crawler = project_crawler(DistributedSpider, {"REDIS_URL": NEVER_CONNECTS})
    pauses = EnginePauses.of(crawler)
    pauses.hold("x")
    pauses.release("x")
    assert not pauses.held


def test_closing_releases_every_holder():
    """A paused engine never finds itself idle, so the spider closing releases all."""
    crawler = crawler_with_engine()
    pauses = EnginePauses.of(crawler)
    pauses.hold("node health", give_back=True)
    pauses.hold("backpressure")
    assert pauses.release_all() == ["backpressure", "node health"]
    assert not crawler.engine.paused and not pauses.held
    assert pauses.release_all() == []
