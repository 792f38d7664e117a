"""Logging in again, with real workers, a real login site and real proxies.

``tests/support/login``: the plain Scrapy spider of docs/SPIDERS.md, whose
``session_expired`` and ``login`` say how to log in again, and a site that
ends sessions as real ones do. Two workers share the jar: a session the site
ends mid-crawl is logged in again once, every page is fetched with a session
and stored once; a login the site keeps refusing ends in dead letters, not a
loop; a proxy the site bans mid-session retires the session, and the spider
logs in again through the other proxy, the old session never sent through it.
"""

from __future__ import annotations

import json
from collections import Counter
from urllib.parse import urlsplit

import orjson
import pytest

from spiders_project.proxies.config import proxy_name
from tests.e2e.test_cookies import LOGIN, login_workers, member_hits
from tests.support.login.site import LoginSite
from tests.support.processes import Proc, stat
from tests.support.proxy import TestProxy

pytestmark = pytest.mark.slow


def stored_pages(r) -> Counter[str]:
    """How often each page is among the items the workers buffered (paths)."""
    entries = [orjson.loads(e)["item"] for e in r.lrange(LOGIN.items, 0, -1)]
    return Counter(urlsplit(item["url"]).path for item in entries)


def dead_letters(r) -> list[dict]:
    return [json.loads(e) for e in r.lrange(LOGIN.dead, 0, -1)]


def total(r, workers: list[Proc], name: str) -> int:
    return sum(stat(r, w, name, LOGIN) for w in workers)


def run(workers: list[Proc]) -> None:
    for w in workers:
        assert w.wait(240) == 0, w.log()[-3000:]


def test_a_session_the_site_ends_mid_crawl_is_logged_in_again_once(redis_url, r, tmp_path, procs):
    with LoginSite(pages=40, latency=0.03, login_redirect=True, expire_after=12) as site:
        workers = login_workers(redis_url, r, tmp_path, procs)
        r.lpush(LOGIN.start_urls, site.login_url)
        run(workers)
        log = site.log()
        posts = [h for h in log if h.method == "POST"]
        members = member_hits(site)
        without = [h for h in members if h.user is None]
        # Shown with -s: the counts of the site's own log.
        print(
            {
                "login POSTs": len(posts),
                "member pages": len(members),
                "sent with the ended session": len(without),
                "relogins": total(r, workers, "cookies/relogins"),
                "sent back to wait": total(r, workers, "cookies/login_waits"),
            }
        )
        # The first login, then exactly one more, after the site ended the first session.
        assert len(posts) == 2 and len(site.ended) == 1 and len(site.made) == 2
        assert total(r, workers, "cookies/relogins") == 1
        # What found the session ended, or would have gone out during the login,
        # went back to the frontier to wait (no download slot held), and was sent again.
        assert total(r, workers, "cookies/login_waits") >= len(without) > 0
        # Every page fetched with a valid session; what met the ended one was sent again.
        assert {h.page for h in members if h.user is not None} == site.member_pages()
        assert all(h.session in site.ended for h in without)
        _, second = list(site.made)
        assert not [h for h in members if h.session == second and h.user is None]
        # Nothing lost, nothing twice: every page's item stored once, none of the login page.
        assert stored_pages(r) == Counter(site.member_pages())
        assert dead_letters(r) == []
        assert all(stat(r, w, "downloader/response_count", LOGIN) > 3 for w in workers)


def test_a_login_the_site_keeps_refusing_ends_in_dead_letters_not_a_loop(
    redis_url, r, tmp_path, procs
):
    with LoginSite(
        pages=40, latency=0.03, login_redirect=True, expire_after=12, max_logins=1
    ) as site:
        attempts = ("COOKIES_LOGIN_ATTEMPTS=3", "COOKIES_LOGIN_TIMEOUT=20")
        workers = login_workers(redis_url, r, tmp_path, procs, 2, *attempts)
        r.lpush(LOGIN.start_urls, site.login_url)
        run(workers)  # the crawl ends: the workers close on idle
        posts = [h for h in site.log() if h.method == "POST"]
        letters = dead_letters(r)
        print({"login POSTs": len(posts), "dead letters": len(letters)})
        # The first login, then COOKIES_LOGIN_ATTEMPTS refused ones, no more.
        assert len(posts) == 1 + 3
        assert total(r, workers, "cookies/relogins") == 3
        assert total(r, workers, "cookies/logins_failed") == 3
        # The last login is a dead letter with its reason; so is every page that waited.
        logins = [d for d in letters if urlsplit(d["url"]).path == "/login"]
        assert len(logins) == 1
        assert logins[0]["error"].startswith("login failed 3 times, last: <302 ")
        assert logins[0]["error"].endswith("is still expired")
        pages = [d for d in letters if d not in logins]
        assert pages
        assert all(
            d["error"].startswith("session of jar default could not be restored: ") for d in pages
        )
        # Every page asked for is stored or a dead letter: none lost, none looping.
        given_up = {urlsplit(d["url"]).path for d in pages}
        assert {h.page for h in member_hits(site)} <= set(stored_pages(r)) | given_up


def test_a_proxy_banned_mid_session_retires_it_and_the_spider_logs_in_again_through_another(
    redis_url, r, tmp_path, procs
):
    with (
        TestProxy("p1", "user", "s3cret-pw") as p1,
        TestProxy("p2", "user", "s3cret-pw") as p2,
        LoginSite(pages=40, latency=0.03, login_redirect=True, ban_proxy_after=10) as site,
    ):
        proxies = (
            f"PROXIES={p1.url},{p2.url}",
            "PROXY_BAN_TIME=600",
            "PROXY_REFRESH_INTERVAL=0.2",
            "RETRY_BACKOFF_MAX=1",
            "RETRY_TIMES=6",
        )
        workers = login_workers(redis_url, r, tmp_path, procs, 2, *proxies)
        r.lpush(LOGIN.start_urls, site.login_url)
        run(workers)
        log = site.log()
        banned = site.banned
        assert banned in ("p1", "p2")
        other = "p2" if banned == "p1" else "p1"
        first, second = list(site.made)
        posts = [h for h in log if h.method == "POST"]
        print(
            {
                "banned": banned,
                "login POSTs": [(h.via, h.path) for h in posts],
                "retired": total(r, workers, "cookies/sessions_retired"),
                "blocked": len([h for h in log if h.via == banned and h.at >= site.banned_at]),
            }
        )
        # The session stuck to one proxy until the site banned it (robots.txt, not
        # the crawl's own request but the engine's, takes the pool's choice) ...
        session = [h for h in log if h.page != "/robots.txt"]
        assert {h.via for h in session if h.at < site.banned_at} == {banned}
        assert site.made == {first: banned, second: other}
        # ... then it was retired once, and the spider logged in once through the other.
        assert [h.via for h in posts] == [banned, other]
        assert total(r, workers, "cookies/sessions_retired") == 1
        assert total(r, workers, "cookies/relogins") == 1
        # The old session never went through the new proxy.
        assert not [h.path for h in log if h.via == other and h.session == first]
        # Every page fetched with a session, and stored once.
        members = member_hits(site)
        assert {h.page for h in members if h.user is not None} == site.member_pages()
        assert stored_pages(r) == Counter(site.member_pages())
        assert p1.refused_auth == p2.refused_auth == 0
        for w in workers:
            assert "s3cret-pw" not in w.log()
        names = {proxy_name(p.url) for p in (p1, p2)}
        assert names == {f"http://127.0.0.1:{p.port}" for p in (p1, p2)}
