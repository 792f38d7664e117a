"""Sessions pinned to proxies for any spider, with real workers and real proxies.

The bundled spider (``distributed``: no ``session_expired``, no ``login``) on
``tests/support/login``'s open pages, through two local proxies
(``tests/support/proxy.py``). A site that gives every new visitor a session
cookie sees that session come through one proxy; when it bans that proxy
mid-crawl, the session is retired once for the cluster and the site gives a
new one through the other proxy, where the old one never goes. A site that
sets no cookie sees the crawl rotate over both proxies.
"""

from __future__ import annotations

import json
from collections import Counter
from urllib.parse import urlsplit

import orjson
import pytest

from tests.support.login.site import LoginSite
from tests.support.processes import K, Proc, stat, wait_until, worker
from tests.support.proxy import TestProxy

pytestmark = pytest.mark.slow

SETTINGS = (
    "MAX_IDLE_TIME_BEFORE_CLOSE=3",
    "FRONTIER_LEASE_TIMEOUT=3",
    # Two downloads each, the site slow enough that both workers fetch.
    "CONCURRENT_REQUESTS=2",
    "PROXY_BAN_TIME=600",
    "PROXY_REFRESH_INTERVAL=0.2",
    "RETRY_BACKOFF_MAX=1",
    "RETRY_TIMES=6",
)


def crawl(redis_url, r, tmp_path, procs, site: LoginSite, *proxies: TestProxy) -> list[Proc]:
    """Two workers crawl ``site`` from ``/open/0`` through ``proxies``, to the end."""
    urls = "PROXIES=" + ",".join(p.url for p in proxies)
    workers = [worker(f"w{i}", redis_url, tmp_path, *SETTINGS, urls) for i in (1, 2)]
    procs += workers
    wait_until(lambda: r.zcard(K.workers) == 2, 60, what="the workers to start")
    r.lpush(K.start_urls, json.dumps({"url": site.url + "open/0"}))
    for w in workers:
        assert w.wait(240) == 0, w.log()[-3000:]
    return workers


def stored_pages(r) -> Counter[str]:
    """How often each page is among the items the workers buffered (paths)."""
    entries = [orjson.loads(e)["item"] for e in r.lrange(K.items, 0, -1)]
    return Counter(urlsplit(item["url"]).path for item in entries)


def total(r, workers: list[Proc], name: str) -> int:
    return sum(stat(r, w, name) for w in workers)


def test_a_session_the_site_sets_stays_on_one_proxy_and_is_retired_when_it_is_banned(
    redis_url, r, tmp_path, procs
):
    with (
        TestProxy("p1") as p1,
        TestProxy("p2") as p2,
        LoginSite(pages=40, latency=0.03, open_cookie="session", ban_proxy_after=12) as site,
    ):
        workers = crawl(redis_url, r, tmp_path, procs, site, p1, p2)
        log = [h for h in site.log() if h.page in site.open_pages()]
        banned = site.banned
        assert banned in ("p1", "p2")
        other = "p2" if banned == "p1" else "p1"
        first, *later = list(site.made)
        print(
            {
                "banned": banned,
                "sessions made": list(site.made.values()),
                "retired": total(r, workers, "cookies/sessions_retired"),
                "through each": Counter(h.via for h in log),
            }
        )
        # The first page, asked without a session, made one; until the ban every
        # request that carried it went through the proxy it was made through.
        assert site.made[first] == banned
        before = [h for h in log if h.at < site.banned_at]
        assert [h.path for h in before if h.session is None] == ["/open/0"]
        assert {(h.session, h.via) for h in before if h.session} == {(first, banned)}
        # Then it was retired once for the cluster, and the site made the next
        # session(s) through the other proxy, where the old one never went.
        assert total(r, workers, "cookies/sessions_retired") == 1
        assert later and {site.made[s] for s in later} == {other}
        assert not [h.path for h in log if h.via == other and h.session == first]
        # No session ever left the proxy it was made through.
        assert [h.path for h in log if h.session and h.via != site.made.get(h.session)] == []
        # Every page fetched and stored once.
        assert stored_pages(r) == Counter(site.open_pages())
        assert all(stat(r, w, "downloader/response_count") > 3 for w in workers)


def test_a_crawl_whose_site_sets_no_cookie_keeps_rotating_over_the_proxies(
    redis_url, r, tmp_path, procs
):
    with (
        TestProxy("p1") as p1,
        TestProxy("p2") as p2,
        LoginSite(pages=40, latency=0.03, open_cookie=None) as site,
    ):
        workers = crawl(redis_url, r, tmp_path, procs, site, p1, p2)
        log = [h for h in site.log() if h.page in site.open_pages()]
        through = Counter(h.via for h in log)
        print({"through each": through})
        # PROXY_MODE=rotate: each worker takes the proxies in turn, page after page.
        assert set(through) == {"p1", "p2"}
        assert min(through.values()) >= len(log) // 4
        assert [h.path for h in log if h.cookies] == []
        assert list(r.scan_iter("cookies:*")) == []
        assert total(r, workers, "cookies/sessions_retired") == 0
        assert stored_pages(r) == Counter(site.open_pages())
