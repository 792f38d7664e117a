"""A jar's cookies in a browser context (``cookies/browser.py``): a Playwright cookie
as an http.cookiejar.Cookie and back, and the books of what a context was given,
what its pages changed and what it removed. Chromium's side of it:
tests/integration/test_rendering_cookies.py."""

from __future__ import annotations

import time
from typing import Any

from scrapy import Request
from scrapy.http import Response
from scrapy.http.cookies import CookieJar

from spiders_project.cookies import codec
from spiders_project.cookies.browser import (
    SESSION,
    BrowserCopy,
    browser_look,
    from_browser,
    jar_domain,
    look,
    to_browser,
)


def jar_of(url: str, *headers: str) -> CookieJar:
    """A jar as Scrapy leaves it after a response with these Set-Cookie headers."""
    jar = CookieJar()
    request = Request(url)
    response = Response(url, headers={"Set-Cookie": list(headers)})
    for cookie in jar.make_cookies(response, request):
        jar.set_cookie_if_ok(cookie, request)
    return jar


def browser(**cookie: Any) -> dict[str, Any]:
    """A cookie as ``BrowserContext.cookies()`` gives it (Chromium's defaults)."""
    return {
        "path": "/",
        "expires": SESSION,
        "httpOnly": False,
        "secure": False,
        "sameSite": "Lax",
        **cookie,
    }


def shown(jar: CookieJar, **changes: dict[str, Any]) -> list[dict[str, Any]]:
    """What a browser holds after it was given ``jar``: Chromium reports a float
    expiry and SameSite Lax for a cookie that named none; ``changes`` by name."""
    result = []
    for cookie in jar:
        data = {"sameSite": "Lax", **to_browser(cookie), **changes.get(cookie.name, {})}
        result.append(data)
    return result


def test_a_jar_cookie_goes_to_the_browser_with_its_attributes_and_comes_back_the_same():
    now = time.time()
    jar = jar_of(
        "https://shop.example/account",
        "session=abc; Path=/; HttpOnly; Secure; SameSite=Strict",
        "region=eu; Domain=shop.example; Path=/; Max-Age=3600",
        "cart=1; Path=/account",
    )
    given = {c.name: to_browser(c) for c in jar}
    assert given["session"] == {
        "name": "session",
        "value": "abc",
        "domain": "shop.example",
        "path": "/",
        "expires": SESSION,
        "httpOnly": True,
        "secure": True,
        "sameSite": "Strict",
    }
    # A domain cookie keeps its dot (the browser sends it to subdomains too),
    # its expiry is the jar's, in seconds.
    region = given["region"]
    assert region["domain"] == ".shop.example" and "sameSite" not in region
    assert abs(region["expires"] - (now + 3600)) < 5
    assert given["cart"]["path"] == "/account"
    # Back from the browser, with the flags only the jar keeps taken from the jar's
    # cookie: the same field, the same value in Redis.
    for cookie in jar:
        back = from_browser({"sameSite": "Lax", **to_browser(cookie)}, like=cookie)
        assert codec.field_of(back) == codec.field_of(cookie)
        assert codec.encode(back) == codec.encode(cookie), cookie.name


def test_a_browser_cookie_becomes_the_cookie_a_set_cookie_of_its_host_would_have_made():
    made = jar_of(
        "http://127.0.0.1:8000/",
        "js=1; Path=/",
        "local=2; Path=/; Expires=Wed, 01 Jan 2120 00:00:00 GMT",
    )
    for cookie in made:
        data = browser(
            name=cookie.name,
            value=cookie.value,
            domain="127.0.0.1",
            expires=cookie.expires + 0.25 if cookie.expires else SESSION,
        )
        back = from_browser(data)
        assert codec.field_of(back) == codec.field_of(cookie)
        assert look(back) == look(cookie)  # the expiry in whole seconds
        assert codec.decode(codec.field_of(back), codec.encode(back)).value == cookie.value
    # A host without a dot: http.cookiejar keeps it as <host>.local, the browser as the host.
    (local,) = jar_of("http://localhost:8000/", "a=1; Path=/")
    assert local.domain == "localhost.local" and to_browser(local)["domain"] == "localhost"
    assert jar_domain("localhost") == "localhost.local"
    assert codec.field_of(from_browser(browser(name="a", value="1", domain="localhost"))) == (
        codec.field_of(local)
    )
    # A domain cookie (leading dot), HttpOnly, SameSite other than the browsers' default.
    cookie = from_browser(
        browser(name="s", value="v", domain=".shop.example", httpOnly=True, sameSite="None")
    )
    assert (cookie.domain, cookie.domain_specified) == (".shop.example", True)
    assert codec.http_only(cookie) and codec.same_site(cookie) == "None"
    assert codec.same_site(from_browser(browser(name="s", value="v", domain="a.example"))) is None


def test_a_context_is_given_what_its_jar_changed_and_nothing_when_it_did_not():
    now = time.time()
    jar = jar_of(
        "http://site.example/",
        "session=abc; Path=/; HttpOnly",
        "far=1; Path=/; Expires=Wed, 01 Jan 2120 00:00:00 GMT",
        "gone=1; Path=/; Max-Age=1",
    )
    copy = BrowserCopy()
    later = now + 10  # "gone" has expired by then: not given
    give = copy.to_give(jar, later)
    assert sorted(c.name for c in give.add) == ["far", "session"] and not give.remove
    # Chromium caps an expiry at 400 days: what it shows differs from what it was
    # given, and that is no change of the page's, nor a reason to give it again.
    capped = {"expires": now + 400 * 86400}
    in_browser = [c for c in shown(jar, far=capped) if c["name"] != "gone"]
    assert copy.given(give, in_browser) == []
    assert not copy.to_give(jar, later)
    assert not copy.taken(in_browser, jar)
    # The jar changes the session (another worker logged in again): given again.
    other = jar_of("http://site.example/", "session=new; Path=/; HttpOnly")
    jar.set_cookie(next(iter(other)))
    give = copy.to_give(jar, later)
    assert [c.value for c in give.add] == ["new"]
    # The jar drops a cookie: it is removed from the context.
    jar.clear("site.example", "/", "far")
    give = copy.to_give(jar, later)
    assert give.remove == [("site.example", "/", "far")] and give.gone


def test_what_the_pages_set_changed_and_removed_is_taken_once():
    now = time.time()
    jar = jar_of("http://site.example/", "session=abc; Path=/; HttpOnly", "consent=yes; Path=/")
    copy = BrowserCopy()
    copy.given(copy.to_give(jar, now), shown(jar))
    # A script sets a cookie and changes one; the server's answer removes consent.
    page = [
        browser(name="session", value="abc", domain="site.example", httpOnly=True),
        browser(name="js", value="7", domain="site.example", expires=now + 60.5),
        browser(name="region", value="eu", domain=".site.example", secure=True),
    ]
    taken = copy.taken(page, jar)
    assert sorted((c.name, c.value, c.domain) for c in taken.cookies) == [
        ("js", "7", "site.example"),
        ("region", "eu", ".site.example"),
    ]
    js = next(c for c in taken.cookies if c.name == "js")
    assert js.expires == int(now + 60.5) and not js.discard
    assert taken.removed == [("site.example", "/", "consent")]
    assert taken.names == ["consent", "js", "region"]
    # Once in the jar, the same context read again has nothing new, and the jar's
    # copy is not given back to it.
    for cookie in taken.cookies:
        jar.set_cookie(cookie)
    jar.clear("site.example", "/", "consent")
    assert not copy.taken(page, jar)
    assert not copy.to_give(jar, now)
    # A cookie the jar already holds as the page left it (another page of the
    # jar's context was read first) is not taken twice.
    again = [*page, browser(name="twice", value="2", domain="site.example")]
    jar.set_cookie(from_browser(again[-1]))
    assert not copy.taken(again, jar)


def test_a_cookie_the_browser_refuses_is_reported_once_and_never_taken_as_removed():
    now = time.time()
    jar = jar_of("http://site.example/", "ok=1; Path=/", "odd=2; Path=/; SameSite=None")
    copy = BrowserCopy()
    give = copy.to_give(jar, now)
    in_browser = [c for c in shown(jar) if c["name"] == "ok"]  # SameSite=None without Secure
    assert [c.name for c in copy.given(give, in_browser)] == ["odd"]
    assert not copy.to_give(jar, now)  # not offered again until the jar changes it
    assert not copy.taken(in_browser, jar)  # the jar keeps it: the HTTP requests send it
    # A page sets it after all: taken.
    with_odd = [*in_browser, browser(name="odd", value="3", domain="site.example")]
    assert [c.value for c in copy.taken(with_odd, jar).cookies] == ["3"]


def test_a_domain_cookie_of_an_ip_address_is_found_as_the_host_cookie_the_browser_made():
    now = time.time()
    jar = jar_of("http://127.0.0.1:8000/", "ip=1; Domain=127.0.0.1; Path=/")
    (cookie,) = jar
    copy = BrowserCopy()
    give = copy.to_give(jar, now)
    made = [{**to_browser(cookie), "domain": "127.0.0.1", "sameSite": "Lax"}]
    assert copy.given(give, made) == []
    assert not copy.to_give(jar, now)
    assert not copy.taken(made, jar)
    assert browser_look(made[0]) == look(cookie)


def test_a_failed_giving_is_given_again_and_its_cookies_not_taken_as_the_pages():
    now = time.time()
    jar = jar_of("http://site.example/", "session=abc; Path=/")
    copy = BrowserCopy()
    give = copy.to_give(jar, now)
    copy.forget(give)  # the browser call was cancelled: unknown what it holds
    assert [c.name for c in copy.to_give(jar, now).add] == ["session"]
    assert not copy.taken(shown(jar), jar)  # it did take it: the jar has it already
