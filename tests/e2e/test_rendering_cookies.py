"""A logged-in crawl whose pages need JavaScript: two workers, each rendering in
Debian's Chromium, on the cookie jars the cluster shares.

``tests/support/login`` with ``js=True``: the login form (CSRF token) is posted
by ``FormRequest.from_response``, over plain HTTP or by Chromium (given the
form's cookie from the jar); the member pages are shells
whose script asks the site's API for their content with the session, which
the browser sends from its own cookie store, and the script of ``/p/1`` sets a
cookie (``document.cookie``) that the pages below it need. The site's log says
what every navigation and every script's request carried, and which worker
(its User-Agent) sent it.
"""

from __future__ import annotations

import json

import pytest

from spiders_project.keys import RedisKeys
from spiders_project.keys.cookies import cookie_jar
from tests.e2e.test_cookies import member_hits, no_cookie_values_anywhere
from tests.support.login.site import Hit, LoginSite
from tests.support.processes import stat, wait_until, worker

pytestmark = pytest.mark.slow

KEYS = RedisKeys("login_rendered")
SETTINGS = (
    "SPIDER_MODULES=tests.support.login.spiders",
    "MAX_IDLE_TIME_BEFORE_CLOSE=3",
    "FRONTIER_LEASE_TIMEOUT=10",
    "CONCURRENT_REQUESTS=2",
    # A new context every 4 pages: contexts that start empty, given the whole jar.
    "RENDER_PAGES_PER_CONTEXT=4",
    # Every line a worker can log, cookie names included, and no value among them.
    "LOG_LEVEL=DEBUG",
    "COOKIES_DEBUG=True",
)


def api_hits(site: LoginSite) -> list[Hit]:
    """The requests the member pages' scripts made for their content."""
    return [h for h in site.log() if h.page.startswith("/api/")]


@pytest.mark.parametrize("login", ["http", "browser"])
def test_two_rendering_workers_crawl_behind_a_login_with_a_cookie_a_script_set(
    login, redis_url, r, tmp_path, procs
):
    with LoginSite(pages=24, latency=0.03, js=True) as site:
        workers = [
            worker(f"w{i}", redis_url, tmp_path, *SETTINGS, f"USER_AGENT=w{i}", spider=KEYS.spider)
            for i in (1, 2)
        ]
        procs += workers
        wait_until(lambda: r.zcard(KEYS.workers) == 2, 60, what="the workers to start")
        if login == "http":
            r.lpush(KEYS.start_urls, site.login_url)
        else:  # the form posted by Chromium: its CSRF cookie from the jar
            seed = {"url": site.login_url, "meta": {"render_login": True}}
            r.lpush(KEYS.start_urls, json.dumps(seed))
        for w in workers:
            assert w.wait(240) == 0, w.log()[-3000:]

        posts = [h for h in site.log() if h.method == "POST"]
        members, api = member_hits(site), api_hits(site)
        rendered = site.rendered_pages()
        needs_member = site.member_only()
        members_api = [h for h in api if h.page.removeprefix("/api") in needs_member]
        member_cookies = set(site.members.values())
        (setter,) = {h.agent for h in api if h.page == "/api/p/1"}
        counts = {
            "login POSTs": len(posts),
            "member pages fetched": len(members),
            "pages rendered (their script's request)": len(api),
            "fetched without the session": len([h for h in members if h.user is None]),
            "scripts' requests without the session": len([h for h in api if h.user is None]),
            "without the script's cookie": len(
                [h for h in members_api if h.cookies.get("member") not in member_cookies]
            ),
            "with it, by the worker that did not set it": len(
                [h for h in members_api if h.agent != setter]
            ),
        }
        print(counts)  # shown with -s: the counts the issue asks for
        assert len(posts) == 1
        # Over HTTP, Scrapy followed the login's redirect; in the browser, Chromium did.
        redirects = sum(stat(r, w, "downloader/response_status_count/302", KEYS) for w in workers)
        assert redirects == (1 if login == "http" else 0)
        assert {h.page for h in members} == site.member_pages()
        # Every member page but the login's redirect rendered, its script asking for
        # its content with the session (a navigation or a request without it: none).
        assert {h.page.removeprefix("/api") for h in api} == rendered
        assert [h.path for h in members + api if h.user is None] == []
        # The cookie /p/1's script set went with every page below it, also from the
        # worker that did not render /p/1 (its browser had it from the shared jar).
        assert [h.path for h in members_api if h.cookies.get("member") not in member_cookies] == []
        assert counts["with it, by the worker that did not set it"] > 0
        assert {h.agent for h in members + api} == {"w1", "w2"}
        assert all(stat(r, w, "render/pages", KEYS) > 3 for w in workers)
        # /forget's answer removed the consent cookie in the browser that rendered it:
        # gone from the jar, so no page found there sent it.
        after_forget = [h for h in members + api if "/f/" in h.page]
        assert after_forget and not [h.path for h in after_forget if "consent" in h.cookies]
        fields = {f.decode().split("\t")[-1] for f in r.hkeys(cookie_jar(KEYS, "default"))}
        assert fields == {"~v", "pre", "session", "member"}
        assert sum(stat(r, w, "render/cookies_taken", KEYS) for w in workers) >= 2
        assert all("Traceback" not in w.log() for w in workers)
        no_cookie_values_anywhere(r, site, workers)
        for w in workers:
            assert not [token for token in member_cookies if token in w.log()], w.name


def test_two_cookiejar_sessions_render_apart(redis_url, r, tmp_path, procs):
    """Two ``meta["cookiejar"]`` sessions rendered at once by the same workers:
    each page, and each of its scripts' requests, with its own session and its
    own session's script cookie (each jar renders in browser contexts of its own)."""
    with LoginSite(pages=16, latency=0.02, js=True) as site:
        workers = [
            worker(f"w{i}", redis_url, tmp_path, *SETTINGS, f"USER_AGENT=w{i}", spider=KEYS.spider)
            for i in (1, 2)
        ]
        procs += workers
        wait_until(lambda: r.zcard(KEYS.workers) == 2, 60, what="the workers to start")
        seeds = [
            json.dumps({"url": site.login_url, "meta": {"cookiejar": user, "user": user}})
            for user in ("alice", "bob")
        ]
        r.lpush(KEYS.start_urls, *seeds)
        for w in workers:
            assert w.wait(240) == 0, w.log()[-3000:]
        assert len([h for h in site.log() if h.method == "POST"]) == 2
        members, api = member_hits(site), api_hits(site)
        assert [h.path for h in members + api if h.user is None or h.mixed] == []
        for user in ("alice", "bob"):
            assert {h.page for h in members if h.user == user} == site.member_pages(), user
            rendered = {h.page.removeprefix("/api") for h in api if h.user == user}
            assert rendered == site.rendered_pages(), user
        needs_member = [h for h in api if h.page.removeprefix("/api") in site.member_only()]
        assert (
            needs_member
            and [
                h.path
                for h in needs_member
                if h.cookies.get("member") != site.members.get(h.cookies["session"])
            ]
            == []
        )
        for user in ("alice", "bob"):
            fields = {f.decode().split("\t")[-1] for f in r.hkeys(cookie_jar(KEYS, user))}
            assert fields == {"~v", "pre", "session", "member"}, user
        no_cookie_values_anywhere(r, site, workers)
