"""Cookies: a cookie as a jar field and back, the change between two jars, the
jars' bounds, the middleware on per-process jars, and the frontier step that
keeps Cookie headers out of what is stored."""

from __future__ import annotations

import asyncio
import logging

import pytest
from scrapy import Request
from scrapy.http import Response
from scrapy.http.cookies import CookieJar
from scrapy.statscollectors import MemoryStatsCollector
from scrapy.utils.test import get_crawler

from spiders_project.cookies import codec
from spiders_project.cookies.codec import BadCookie, Change, diff, jar_id, snapshot
from spiders_project.cookies.config import (
    MAX_COOKIE_BYTES,
    MAX_COOKIES_PER_DOMAIN,
    CookiesConfig,
)
from spiders_project.cookies.middleware import SharedCookiesMiddleware
from spiders_project.cookies.sessions import PROXY_FIELD
from spiders_project.cookies.steps import ForgetCookiesStep
from spiders_project.cookies.store import ProcessJars, SharedJars, cookie_jars
from spiders_project.crawl.meta import LEASED_AT, PROXY_NAME
from spiders_project.dead_letters.middleware import DeadLetters
from spiders_project.frontier.steps import Enqueue, FrontierSteps
from spiders_project.spiders.distributed import DistributedSpider
from tests.support.crawlers import NEVER_CONNECTS, project_crawler

URL = "http://shop.example/account/orders"


def _set(jar: CookieJar, url: str, *headers: str) -> None:
    """What Scrapy does with a response's Set-Cookie headers."""
    request = Request(url)
    response = Response(url, headers={"Set-Cookie": list(headers)})
    for cookie in jar.make_cookies(response, request):
        jar.set_cookie_if_ok(cookie, request)


def test_a_cookie_is_one_field_and_comes_back_as_it_went():
    jar = CookieJar()
    _set(
        jar,
        URL,
        "session=abc; Path=/; HttpOnly; Secure; SameSite=Lax",
        "region=eu; Domain=shop.example; Max-Age=3600",
        "bare",
    )
    fields = snapshot(jar)
    assert set(fields) == {
        "shop.example\t/\tsession",
        ".shop.example\t/account\tregion",
        "shop.example\t/account\tbare",
    }
    again = CookieJar()
    for name, value in fields.items():
        again.set_cookie(codec.decode(name, value))
    assert snapshot(again) == fields
    session = codec.decode("shop.example\t/\tsession", fields["shop.example\t/\tsession"])
    assert session.secure and session.has_nonstandard_attr("HttpOnly")
    assert session.get_nonstandard_attr("SameSite") == "Lax" and session.discard
    region = codec.decode(
        ".shop.example\t/account\tregion", fields[".shop.example\t/account\tregion"]
    )
    assert region.domain_specified and isinstance(region.expires, int) and not region.discard


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("no-tabs", '{"value": "x"}'),
        ("d\t/\tn", "not json"),
        ("d\t/\tn", "[1]"),
        ("d\t/\tn", '{"value": 1}'),
        ("d\t/\tn", '{"value": "x", "expires": "soon"}'),
        ("d\t/\tn", '{"value": "x", "secure": "yes"}'),
        ("d\tno-slash\tn", '{"value": "x"}'),
    ],
)
def test_a_field_that_is_not_ours_is_refused_by_name(name, value):
    with pytest.raises(BadCookie) as caught:
        codec.decode(name, value)
    assert '"x"' not in str(caught.value)


def test_a_jar_as_read_skips_expired_and_bad_cookies_and_keeps_its_own_fields():
    fields = {
        b"~v": b"1700000000007",
        b"~proxy": b"http://p1:3128",
        b"d\t/\tok": b'{"value":"1","expires":null}',
        b"d\t/\told": b'{"value":"2","expires":1000}',
        b"d\t/\tbad": b"{",
    }
    loaded = codec.load(fields, now=2000)
    assert loaded.version == 1700000000007
    assert loaded.control == {"~proxy": "http://p1:3128"}
    assert [c.name for c in loaded.cookies] == ["ok"]
    assert len(loaded.bad) == 1 and "bad" in loaded.bad[0]
    assert codec.version_of(None) == 0 and codec.version_of(b"x") == -1


def test_the_change_between_two_jars_sets_what_differs_and_deletes_what_went():
    before = {"a": "1", "b": "2", "c": "3"}
    after = {"a": "1", "b": "22", "d": "4"}
    assert diff(before, after) == Change(sets={"b": "22", "d": "4"}, deletes=["c"])
    assert not diff(before, dict(before))


def test_jar_ids_are_text():
    assert jar_id(None) == "default"
    assert jar_id(1) == jar_id("1") == "1"


def test_a_cookie_the_server_expires_leaves_the_jar_as_a_delete():
    store = ProcessJars()
    local = store.jar("default")
    _set(local.cookies, URL, "consent=yes; Path=/")
    before = snapshot(local.cookies)
    _set(local.cookies, URL, "consent=; Path=/; Expires=Thu, 01 Jan 1970 00:00:00 GMT")
    assert store.changed(local, before) == Change(deletes=["shop.example\t/\tconsent"])


def test_an_oversized_cookie_keeps_its_old_value_and_is_reported_by_name(caplog):
    stats = MemoryStatsCollector(get_crawler())
    store = ProcessJars(stats)
    local = store.jar("default")
    _set(local.cookies, URL, "big=small; Path=/")
    before = snapshot(local.cookies)
    huge = "v" * MAX_COOKIE_BYTES
    with caplog.at_level(logging.WARNING):
        _set(local.cookies, URL, f"big={huge}; Path=/", "other=1; Path=/")
        change = store.changed(local, before)
    assert list(change.sets) == ["shop.example\t/\tother"]
    assert snapshot(local.cookies)["shop.example\t/\tbig"] == before["shop.example\t/\tbig"]
    assert "Cookie big of shop.example not kept" in caplog.text
    assert huge not in caplog.text
    assert stats.get_value("cookies/dropped") == 1


def test_a_domain_keeps_at_most_its_bound_of_cookies():
    store = ProcessJars()
    local = store.jar("default")
    before = snapshot(local.cookies)
    headers = [f"c{i}=x; Path=/" for i in range(MAX_COOKIES_PER_DOMAIN + 5)]
    _set(local.cookies, URL, *headers)
    change = store.changed(local, before)
    assert len(change.sets) == MAX_COOKIES_PER_DOMAIN
    assert len(snapshot(local.cookies)) == MAX_COOKIES_PER_DOMAIN


def _middleware(debug: bool = False) -> SharedCookiesMiddleware:
    return SharedCookiesMiddleware(ProcessJars(), debug=debug)


def _send(mw: SharedCookiesMiddleware, request: Request) -> None:
    asyncio.run(mw.process_request(request))


def test_the_middleware_keeps_scrapys_semantics_on_its_jars():
    mw = _middleware()
    login = Request("http://shop.example/login", meta={"cookiejar": 1})
    asyncio.run(
        mw.process_response(login, Response(login.url, headers={"Set-Cookie": "s=1; Path=/"}))
    )
    same = Request("http://shop.example/p", meta={"cookiejar": "1", LEASED_AT: 0.0})
    _send(mw, same)
    assert same.headers.get("Cookie") == b"s=1"
    other_jar = Request("http://shop.example/p")
    _send(mw, other_jar)
    assert b"Cookie" not in other_jar.headers
    other_site = Request("http://elsewhere.example/", meta={"cookiejar": 1})
    _send(mw, other_site)
    assert b"Cookie" not in other_site.headers
    own = Request("http://shop.example/q", meta={"dont_merge_cookies": True})
    own.headers["Cookie"] = "mine=1"
    _send(mw, own)
    assert own.headers.get("Cookie") == b"mine=1"
    given = Request("http://shop.example/r", cookies={"lang": "de"}, meta={"cookiejar": 1})
    _send(mw, given)
    assert given.headers.get("Cookie") in (b"s=1; lang=de", b"lang=de; s=1")


def test_a_jars_first_cookie_pins_it_to_the_proxy_it_came_through():
    store = ProcessJars(MemoryStatsCollector(get_crawler()))
    mw = SharedCookiesMiddleware(store)

    def answer(via: str | None, set_cookie: str) -> None:
        request = Request("http://shop.example/", meta={PROXY_NAME: via} if via else {})
        response = Response(request.url, headers={"Set-Cookie": set_cookie})
        asyncio.run(mw.process_response(request, response))

    answer("http://p1:1", "gone=; Path=/; Expires=Thu, 01 Jan 1970 00:00:00 GMT")
    assert PROXY_FIELD not in store.jar("default").control  # no cookie, no session
    answer("http://p1:1", "session=s1; Path=/")
    assert store.jar("default").control[PROXY_FIELD] == "http://p1:1"
    # Another session, through another proxy: refused; without a proxy (the spider's own): kept.
    answer("http://p2:2", "session=s2; Path=/")
    answer(None, "lang=de; Path=/")
    assert {c.name: c.value for c in store.jar("default").cookies} == {
        "session": "s1",
        "lang": "de",
    }
    assert store.stats is not None
    assert store.stats.get_value("cookies/refused_other_proxy") == 1


def test_a_response_without_set_cookie_changes_nothing():
    store = ProcessJars()
    mw = SharedCookiesMiddleware(store)
    request = Request("http://shop.example/")
    assert asyncio.run(mw.process_response(request, Response(request.url))) is not None
    assert len(store.jar("default").cookies) == 0


def test_cookies_debug_logs_names_never_values(caplog):
    mw = _middleware(debug=True)
    request = Request("http://shop.example/login")
    response = Response(request.url, headers={"Set-Cookie": "session=t0ps3cret; Path=/"})
    with caplog.at_level(logging.DEBUG, logger="spiders_project.cookies"):
        asyncio.run(mw.process_response(request, response))
        _send(mw, Request("http://shop.example/p"))
    assert "session" in caplog.text
    assert "t0ps3cret" not in caplog.text


def test_cookies_for_a_url_and_an_update_from_elsewhere():
    store = ProcessJars()
    jar = CookieJar()
    _set(jar, "https://shop.example/", "secure=1; Path=/; Secure", "plain=2; Path=/cart")
    change = store.update("j", list(jar))
    assert len(change.sets) == 2
    http = asyncio.run(store.cookies_for("j", "http://shop.example/cart/x"))
    assert [c.name for c in http] == ["plain"]
    https = asyncio.run(store.cookies_for("j", "https://shop.example/cart"))
    assert sorted(c.name for c in https) == ["plain", "secure"]
    removed = store.update("j", [], removed=[("shop.example", "/cart", "plain")])
    assert removed.deletes == ["shop.example\t/cart\tplain"]


def test_the_config_reads_scrapys_switches_and_ours():
    crawler = get_crawler(
        settings_dict={"COOKIES_SHARED": "false", "COOKIES_JAR_TTL": "60", "COOKIES_DEBUG": True}
    )
    config = CookiesConfig.from_settings(crawler.settings)
    assert config == CookiesConfig(enabled=True, shared=False, jar_ttl=60.0, debug=True)
    assert config.jar_ttl_ms == 60_000


def test_a_stored_request_carries_no_cookie_header():
    request = Request("http://shop.example/p", meta={LEASED_AT: 1.0, "keep": 1})
    request.headers["Cookie"] = "session=abc"
    kept = FrontierSteps([ForgetCookiesStep()]).admit(request, Enqueue())
    assert kept is not None and b"Cookie" not in kept.headers
    assert kept.meta == {"keep": 1}
    own = Request("http://shop.example/p", meta={"dont_merge_cookies": True})
    own.headers["Cookie"] = "mine=1"
    assert FrontierSteps([ForgetCookiesStep()]).stored(own).headers.get("Cookie") == b"mine=1"
    off = Request("http://shop.example/p")
    off.headers["Cookie"] = "mine=1"
    assert ForgetCookiesStep(enabled=False).stored(off).headers.get("Cookie") == b"mine=1"


def test_a_dead_letter_carries_no_cookie_value():
    written: list[bytes] = []
    letters = DeadLetters(
        written.append,
        MemoryStatsCollector(get_crawler()),
        worker="w",
        key="s:dead",
        stored=FrontierSteps([ForgetCookiesStep()]).stored,
    )
    request = Request("http://shop.example/p")
    request.headers["Cookie"] = "session=t0ps3cret"
    letters.dead_letter(request, "HTTP 503")
    assert len(written) == 1 and b"t0ps3cret" not in written[0]


def test_every_component_of_a_crawler_gets_the_same_jars():
    async def jars(shared: bool) -> tuple[object, object]:
        settings = {"REDIS_URL": NEVER_CONNECTS, "COOKIES_SHARED": shared}
        crawler = project_crawler(DistributedSpider, settings)
        return cookie_jars(crawler), SharedCookiesMiddleware.from_crawler(crawler).store

    one, other = asyncio.run(jars(True))
    assert one is other and isinstance(one, SharedJars)
    one, other = asyncio.run(jars(False))
    assert one is other and type(one) is ProcessJars
