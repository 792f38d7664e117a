"""The scope's frontier steps: a seed's entry, its URL, its seed's recrawl_after."""

from __future__ import annotations

from scrapy import Request

from spiders_project.crawl.meta import RETRY_WAIT, SCOPE_META, SEED, SEED_ENTRY
from spiders_project.frontier.steps import Enqueue, FrontierSteps
from spiders_project.scope.seeds import seed_reached
from spiders_project.scope.steps import SeedEntryStep, SeedLimitsStep, UrlRulesStep
from spiders_project.spiders.distributed import DistributedSpider
from tests.support.crawlers import NEVER_CONNECTS, project_crawler


def crawler_with(**settings):
    return project_crawler(DistributedSpider, {"REDIS_URL": NEVER_CONNECTS, **settings})


def test_a_seed_claims_its_entry_is_recorded_and_the_seed_reader_hears_of_it():
    crawler = crawler_with()
    heard = []

    def hear(entry: bytes) -> None:
        heard.append(entry)

    crawler.signals.connect(hear, signal=seed_reached)  # held weakly: a named function
    step = SeedEntryStep.from_crawler(crawler)
    request = Request("http://a.example/", meta={SEED: True, SEED_ENTRY: "http://a.example/"})
    entry = Enqueue()
    assert step.admit(request, entry) is request
    assert entry.seed_entry == b"http://a.example/" and entry.record
    assert SEED_ENTRY not in request.meta  # never stored
    assert heard == [b"http://a.example/"]


def test_a_link_claims_nothing_and_is_not_recorded_unless_filtered():
    step = SeedEntryStep.from_crawler(crawler_with())
    entry = Enqueue()
    step.admit(Request("http://a.example/x"), entry)
    assert entry.seed_entry == b"" and not entry.record


def test_urls_are_normalised_and_traps_dropped_with_a_stat_but_never_a_seed():
    crawler = crawler_with(URL_MAX_LENGTH=40)
    step = UrlRulesStep.from_crawler(crawler)
    request = step.admit(Request("http://A.example:80/p?utm_source=x&q=1"), Enqueue())
    assert request is not None and request.url == "http://a.example/p?q=1"
    long_url = "http://a.example/" + "x" * 40
    assert step.admit(Request(long_url), Enqueue()) is None
    assert crawler.stats.get_value("scope/url_too_long") == 1
    assert step.admit(Request(long_url), Enqueue(seed_entry=b"s")) is not None


def test_a_seed_that_keeps_tracking_parameters_keeps_them_for_its_links():
    step = UrlRulesStep.from_crawler(crawler_with())
    meta = {SCOPE_META: {"id": "s", "strip_params": False}}
    request = step.admit(Request("http://a.example/p?utm_source=x", meta=meta), Enqueue())
    assert request is not None and request.url == "http://a.example/p?utm_source=x"


def test_recrawl_after_needs_a_timed_seen_set_a_seed_asking_for_it_is_rejected():
    crawler = crawler_with()  # RECRAWL_AFTER unset: the seen-set keeps no times
    step = SeedLimitsStep.from_crawler(crawler)
    meta = {SCOPE_META: {"id": "s", "recrawl_after": 60}}
    assert step.admit(Request("http://a.example/", meta=meta), Enqueue(seed_entry=b"s")) is None
    assert len(step.batcher) == 1  # the reject, on its way to start_urls:rejected
    # A page of such a seed just loses it.
    entry = Enqueue()
    assert step.admit(Request("http://a.example/x", meta=meta), entry) is not None
    assert entry.recrawl_after is None


def test_a_timed_seen_set_takes_a_seeds_recrawl_after():
    step = SeedLimitsStep.from_crawler(crawler_with(RECRAWL_AFTER=3600))
    entry = Enqueue()
    meta = {SCOPE_META: {"id": "s", "recrawl_after": 60}}
    assert step.admit(Request("http://a.example/", meta=meta), entry) is not None
    assert entry.recrawl_after == 60


def test_the_default_chain_admits_a_retry_with_its_wait_and_names_its_group():
    steps = FrontierSteps.of(crawler_with(POLITENESS_KEY="domain"))
    entry = Enqueue()
    request = Request("http://www.A.example.co.uk/p", meta={RETRY_WAIT: 1500})
    admitted = steps.admit(request, entry)
    assert admitted is not None and RETRY_WAIT not in admitted.meta
    assert entry.wait_ms == 1500
    assert steps.group_of(admitted.url) == "example.co.uk"


def test_without_link_recrawls_a_link_is_never_enqueued_again_a_seed_keeps_its_own():
    step = SeedLimitsStep.from_crawler(crawler_with(RECRAWL_AFTER=3600, RECRAWL_LINKS=False))
    link = Enqueue()
    assert step.admit(Request("http://a.example/x"), link) is not None
    assert link.recrawl_after == 0  # its revisits come from the pages table
    seed = Enqueue(seed_entry=b"s")
    assert step.admit(Request("http://a.example/", meta={SEED: True}), seed) is not None
    assert seed.recrawl_after is None
    own = Enqueue()
    meta = {SCOPE_META: {"id": "s", "recrawl_after": 60}}
    assert step.admit(Request("http://a.example/y", meta=meta), own) is not None
    assert own.recrawl_after == 60
    # RECRAWL_LINKS off is the default; on, a link brings a URL back as before.
    default = Enqueue()
    step = SeedLimitsStep.from_crawler(crawler_with(RECRAWL_AFTER=3600))
    assert step.admit(Request("http://a.example/x"), default) is not None
    assert default.recrawl_after == 0
    on = Enqueue()
    step = SeedLimitsStep.from_crawler(crawler_with(RECRAWL_AFTER=3600, RECRAWL_LINKS=True))
    assert step.admit(Request("http://a.example/x"), on) is not None
    assert on.recrawl_after is None
