"""The proxies' frontier step: a pool proxy's name and credentials are never stored."""

from __future__ import annotations

from scrapy import Request

from spiders_project.crawl.meta import PROXY_NAME
from spiders_project.frontier.steps import Enqueue
from spiders_project.proxies.steps import ForgetProxyStep


def test_a_pool_proxy_and_its_credentials_are_taken_off():
    request = Request(
        "http://a.example/",
        meta={PROXY_NAME: "p1", "proxy": "http://p1:3128", "keep": 1},
        headers={"Proxy-Authorization": "Basic dTpw"},
    )
    kept = ForgetProxyStep().admit(request, Enqueue())
    assert kept.meta == {"keep": 1}
    assert b"Proxy-Authorization" not in kept.headers


def test_a_proxy_the_spider_set_itself_is_kept():
    request = Request("http://a.example/", meta={"proxy": "http://mine:3128"})
    assert ForgetProxyStep().admit(request, Enqueue()).meta == {"proxy": "http://mine:3128"}
