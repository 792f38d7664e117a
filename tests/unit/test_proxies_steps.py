"""The proxies' frontier step: a pool proxy's name and credentials are never
stored, in the frontier or in a dead letter."""

from __future__ import annotations

from scrapy import Request
from scrapy.statscollectors import MemoryStatsCollector
from scrapy.utils.test import get_crawler

from spiders_project.crawl.meta import PROXY_NAME, PROXY_PIN
from spiders_project.dead_letters.middleware import DeadLetters
from spiders_project.frontier.steps import Enqueue, FrontierSteps
from spiders_project.proxies.steps import ForgetProxyStep


def _proxied() -> Request:
    return Request(
        "http://a.example/",
        meta={PROXY_NAME: "p1", PROXY_PIN: "p1", "proxy": "http://p1:3128", "keep": 1},
        headers={"Proxy-Authorization": "Basic dTpw"},
    )


def test_a_pool_proxy_and_its_credentials_are_taken_off_before_the_frontier():
    kept = FrontierSteps([ForgetProxyStep()]).admit(_proxied(), Enqueue())
    assert kept is not None
    assert kept.meta == {"keep": 1}
    assert b"Proxy-Authorization" not in kept.headers


def test_a_proxy_the_spider_set_itself_is_kept():
    request = Request("http://a.example/", meta={"proxy": "http://mine:3128"})
    kept = FrontierSteps([ForgetProxyStep()]).admit(request, Enqueue())
    assert kept is not None and kept.meta == {"proxy": "http://mine:3128"}


def test_a_dead_letter_carries_no_pool_proxy():
    written: list[bytes] = []
    letters = DeadLetters(
        written.append,
        MemoryStatsCollector(get_crawler()),
        worker="w",
        key="s:dead",
        stored=FrontierSteps([ForgetProxyStep()]).stored,
    )
    request = _proxied()
    letters.dead_letter(request, "HTTP 503")
    assert len(written) == 1
    assert b"p1" not in written[0] and b"dTpw" not in written[0]
    # The request the spider still holds keeps its proxy: only the copy is stored.
    assert request.meta[PROXY_NAME] == "p1"
