"""Cookie jars in Debian's Chromium (``rendering/context_cookies.py``): a context is
given its jar's cookies before a page navigates, and what the page's server and
scripts set, changed and removed comes back into the jar, expiries included.
A real browser and a local site that logs the Cookie header of every request;
the jars are a process' own, then two workers' shared through a real Redis
(whole crawls: tests/e2e/test_rendering_cookies.py)."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from playwright.async_api import BrowserContext, async_playwright
from scrapy import Request
from scrapy.http import Response
from scrapy.http.cookies import CookieJar

from spiders_project.config import load_settings
from spiders_project.cookies import codec
from spiders_project.cookies.store import ProcessJars
from spiders_project.crawl.meta import LEASED_AT
from spiders_project.frontier.write_behind.ops import PRIOR
from spiders_project.rendering.context_cookies import ContextCookies, in_generation
from tests.integration.test_cookies import Worker

FAR = "Wed, 01 Jan 2120 00:00:00 GMT"
# What each page answers: its Set-Cookie headers, and the script it runs.
PAGES = {
    "/echo": ([], ""),
    "/set": (
        ["srv=1; Path=/; Max-Age=3600", "old=; Path=/; Expires=Thu, 01 Jan 1970 00:00:00 GMT"],
        "document.cookie = 'js=2; path=/; max-age=600';"
        "document.cookie = 'gone=; path=/; expires=Thu, 01 Jan 1970 00:00:00 GMT';"
        "fetch('/api');",
    ),
    # The answer to the page's own request sets a cookie too.
    "/api": (["sub=3; Path=/; HttpOnly"], ""),
}


class CookieSite:
    """Serves PAGES on a free port; ``seen`` holds (path, Cookie header) of each request."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                site.seen.append((self.path, self.headers.get("Cookie") or ""))
                set_cookies, script = PAGES.get(self.path, ([], ""))
                body = f"<html><body><script>{script}</script></body></html>".encode()
                self.send_response(200)
                for header in set_cookies:
                    self.send_header("Set-Cookie", header)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def cookies_of(self, path: str) -> dict[str, str]:
        """The cookies the last request for ``path`` carried."""
        header = [cookie for p, cookie in self.seen if p == path][-1]
        return dict(part.split("=", 1) for part in header.split("; ") if part)


@pytest.fixture
def site() -> Iterator[CookieSite]:
    served = CookieSite()
    threading.Thread(target=served.server.serve_forever, daemon=True).start()
    yield served
    served.server.shutdown()
    served.server.server_close()


def answer(jars: ProcessJars, jar: str, url: str, *headers: str) -> None:
    """``jar`` as a plain response with these Set-Cookie headers leaves it."""
    local = jars.jar(jar)
    before = codec.snapshot(local.cookies)
    request = Request(url)
    for cookie in local.cookies.make_cookies(
        Response(url, headers={"Set-Cookie": list(headers)}), request
    ):
        local.cookies.set_cookie_if_ok(cookie, request)
    jars.changed(local, before)


def cookies(jar: CookieJar) -> dict[str, Any]:
    return {c.name: c for c in jar}


async def render(cookies_: ContextCookies, context: BrowserContext, url: str, **meta: Any) -> bool:
    """A page of ``context`` renders ``url`` as the handler renders one: given its
    jar's cookies first, read back after."""
    request = Request(url, meta=meta)
    jar = await cookies_.give(request, context)
    page = await context.new_page()
    await page.goto(url, wait_until="load")
    await page.wait_for_load_state("networkidle")
    await page.close()
    return jar is not None and await cookies_.take_back(request, context, jar)


async def crawl(site: CookieSite, jars: ProcessJars, cookies_: ContextCookies) -> dict[str, Any]:
    options = load_settings().getdict("PLAYWRIGHT_LAUNCH_OPTIONS")
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(**options)
        alice, bob = await browser.new_context(), await browser.new_context()
        found: dict[str, Any] = {}
        # Each jar's session, in a context of its own.
        assert await render(cookies_, alice, site.url + "/echo")
        found["alice first"] = site.cookies_of("/echo")
        assert await render(cookies_, bob, site.url + "/echo", cookiejar="bob")
        found["bob first"] = site.cookies_of("/echo")
        # The server and the page's script set, change and remove cookies.
        assert await render(cookies_, alice, site.url + "/set")
        found["alice after set"] = {c["name"] for c in await alice.cookies()}
        # Another worker changes the session meanwhile: the next page sends the new one.
        answer(jars, "default", site.url + "/", "session=renewed; Path=/; HttpOnly")
        assert await render(cookies_, alice, site.url + "/echo")
        found["alice renewed"] = site.cookies_of("/echo")
        found["bob cookies"] = {c["name"] for c in await bob.cookies()}
        # Without a jar (dont_merge_cookies): nothing given, nothing taken.
        assert not await render(cookies_, bob, site.url + "/echo", dont_merge_cookies=True)
        await browser.close()
    return found


def test_a_context_gets_its_jar_and_gives_back_what_the_page_set(site, caplog):
    caplog.set_level(logging.DEBUG)
    jars = ProcessJars()
    answer(
        jars,
        "default",
        site.url + "/login",
        "session=alice-secret; Path=/; HttpOnly",
        "old=1; Path=/",
        "gone=1; Path=/",
        f"far=1; Path=/; Expires={FAR}",
    )
    answer(jars, "bob", site.url + "/login", "session=bob-secret; Path=/; HttpOnly")
    far_before = codec.encode(cookies(jars.jar("default").cookies)["far"])
    cookies_ = ContextCookies(lambda: jars, debug=True)
    found = asyncio.run(crawl(site, jars, cookies_))

    # Before navigation, each context had its own jar's cookies, HttpOnly ones too.
    assert found["alice first"] == {"session": "alice-secret", "old": "1", "gone": "1", "far": "1"}
    assert found["bob first"] == {"session": "bob-secret"}
    # What the server set (srv), the script set (js) and the answer to its request
    # set (sub) are in the jar; what the server (old) and the script (gone) removed is not.
    jar = cookies(jars.jar("default").cookies)
    assert set(jar) == {"session", "srv", "js", "sub", "far"}
    assert jar["sub"].value == "3" and codec.http_only(jar["sub"])
    assert jar["srv"].value == "1" and abs(jar["srv"].expires - (time.time() + 3600)) < 60
    assert jar["js"].value == "2" and abs(jar["js"].expires - (time.time() + 600)) < 60
    assert not codec.http_only(jar["js"]) and codec.http_only(jar["session"])
    # Chromium keeps "far" for 400 days at most: the jar keeps its own expiry.
    assert codec.encode(jar["far"]) == far_before
    # A change of the jar from elsewhere reaches the context before the next page.
    assert found["alice renewed"] == {
        "session": "renewed",
        "srv": "1",
        "js": "2",
        "sub": "3",
        "far": "1",
    }
    # Nothing of alice's jar in bob's context, and bob's jar untouched.
    assert found["bob cookies"] == {"session"}
    assert set(cookies(jars.jar("bob").cookies)) == {"session"}
    # Names in the debug lines, never a value.
    assert "Cookies from the page of" in caplog.text
    assert "secret" not in caplog.text and "renewed" not in caplog.text


def test_each_jar_renders_in_a_context_of_its_own_closed_with_its_generation():
    cookies_ = ContextCookies(ProcessJars)
    assert cookies_.context_for(Request("http://a.example/"), "render-3") == "render-3/jar:default"
    bob = Request("http://a.example/", meta={"cookiejar": "bob"})
    assert cookies_.context_for(bob, "render-3") == "render-3/jar:bob"
    own = Request("http://a.example/", meta={"dont_merge_cookies": True})
    assert cookies_.context_for(own, "render-3") == "render-3"
    assert ContextCookies(ProcessJars, enabled=False).context_for(bob, "render-3") == "render-3"
    assert in_generation("render-3/jar:bob", "render-3") and in_generation("render-3", "render-3")
    assert not in_generation("render-30/jar:bob", "render-3")


async def two_workers(site: CookieSite, redis_url: str) -> dict[str, Any]:
    """Worker b renders a page whose script sets a cookie; worker a's next
    page, leased after b's page was acknowledged, has it."""
    a, b = Worker(redis_url), Worker(redis_url)
    found: dict[str, Any] = {}
    options = load_settings().getdict("PLAYWRIGHT_LAUNCH_OPTIONS")
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(**options)
        in_a = ContextCookies(lambda: a.jars, stats=a.crawler.stats)
        in_b = ContextCookies(lambda: b.jars, stats=b.crawler.stats)
        a_context, b_context = await browser.new_context(), await browser.new_context()
        await a.answer(site.url + "/login", "session=s1; Path=/; HttpOnly")
        await a.redis.batcher.flush()
        # a renders a page before b's: its copy of the jar is read, then goes stale.
        await render(in_a, a_context, site.url + "/echo", **{LEASED_AT: time.monotonic()})
        await render(in_b, b_context, site.url + "/set", **{LEASED_AT: time.monotonic()})
        # What b's page set goes in as one prior write, with the page's links and ack
        # (beside the renewal of the jar's time to live that its first use writes).
        found["b's writes"] = [op.kind for op in b.redis.batcher._ops if op.kind == PRIOR]
        await b.redis.batcher.flush()
        await render(in_a, a_context, site.url + "/echo", **{LEASED_AT: time.monotonic()})
        found["a's next page"] = site.cookies_of("/echo")
        await browser.close()
    await a.close()
    await b.close()
    return found


def test_what_one_workers_page_set_is_in_the_next_page_another_worker_leases(site, redis_url):
    found = asyncio.run(two_workers(site, redis_url))
    assert found["b's writes"] == [PRIOR]
    assert found["a's next page"] == {"session": "s1", "srv": "1", "js": "2", "sub": "3"}
