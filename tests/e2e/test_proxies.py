"""Proxies: rotation, bans shared by the cluster, all banned then unbanned; real workers."""

from __future__ import annotations

import json
import zlib
from urllib.parse import urlsplit

import orjson
import pytest

from spiders_project.proxies.config import proxy_name
from spiders_project.read_model.cluster_view import read_cluster
from tests.support.processes import K, stat, wait_until, worker
from tests.support.proxy import TestProxy
from tests.support.services import free_port
from tests.support.wild import WildSite

pytestmark = pytest.mark.slow

SECRET = "s3cret-pw"
SEED = {"deny": ["/cal/", "/loop/", "/flaky/", "/private/"]}


def items(r) -> list[dict]:
    return [orjson.loads(e)["item"] for e in r.lrange(K.items, 0, -1)]


def proxy_settings(*proxies: TestProxy, ban_time: float) -> list[str]:
    return [
        "PROXIES=" + ",".join(p.url for p in proxies),
        f"PROXY_BAN_TIME={ban_time}",
        "PROXY_REFRESH_INTERVAL=0.2",
        'BAN_BODY_PATTERNS=["CAPTCHA"]',
        "RETRY_BACKOFF_BASE=0.2",
        "RETRY_BACKOFF_MAX=1",
    ]


def test_a_banned_proxy_is_not_used_by_any_worker_during_its_ban(redis_url, r, tmp_path, procs):
    with (
        TestProxy("p1", "user", SECRET) as p1,
        TestProxy("p2", "user", SECRET) as p2,
        WildSite(docs=40, latency=0.02) as site,
    ):
        site.ban_via = {"p1": 3}
        workers = [
            worker(
                f"w{i}",
                redis_url,
                tmp_path,
                "MAX_IDLE_TIME_BEFORE_CLOSE=3",
                *proxy_settings(p1, p2, ban_time=600),
            )
            for i in (1, 2)
        ]
        procs += workers
        wait_until(lambda: r.zcard(K.workers) == 2, 60, what="two workers")
        r.lpush(K.start_urls, json.dumps({"url": site.url, **SEED}))
        for w in workers:
            assert w.wait(180) == 0, w.log()[-3000:]
        log = site.via_log()
        # Every page came through a proxy, and was stored once; no ban page was.
        assert {via for _, _, _, via, _ in log} == {"p1", "p2"}
        stored = items(r)
        assert sorted(i["url"] for i in stored) == sorted({site.url, *site.doc_urls()})
        assert all(i["title"] != "Check" for i in stored)
        # After its first ban page, p1 saw nothing but what was already on its way.
        banned_at = min(t for t, _, _, via, ban in log if via == "p1" and ban)
        late = [p for t, p, _, via, _ in log if via == "p1" and t > banned_at + 0.5]
        assert late == [], late
        assert p1.refused_auth == p2.refused_auth == 0
        names = {proxy_name(p.url) for p in (p1, p2)}
        assert sum(stat(r, w, f"proxies/bans/{proxy_name(p1.url)}") for w in workers) == 1
        assert all(sum(stat(r, w, f"proxies/requests/{n}") for w in workers) > 0 for n in names)
        # The exporter's view: p1 banned, p2 not.
        view = read_cluster(lambda _, cmds: _send(r, cmds), ["distributed"], worker_retention=900)
        assert view.spiders[0].proxies(view.time) == {
            proxy_name(p1.url): True,
            proxy_name(p2.url): False,
        }
    # Credentials never reach a log or Redis.
    for w in workers:
        assert SECRET not in w.log()
    for key in r.scan_iter():
        dump = r.dump(key) or b""
        assert SECRET.encode() not in dump, key


def _send(r, commands):
    pipe = r.pipeline(transaction=False)
    for command in commands:
        pipe.execute_command(*command)
    return pipe.execute()


def test_when_every_proxy_is_banned_requests_wait_then_go_on(redis_url, r, tmp_path, procs):
    with (
        TestProxy("p1") as p1,
        TestProxy("p2") as p2,
        WildSite(docs=8, latency=0.02) as site,
    ):
        site.ban_all_via_for = 3
        w = worker(
            "w",
            redis_url,
            tmp_path,
            "MAX_IDLE_TIME_BEFORE_CLOSE=3",
            "RETRY_TIMES=10",
            *proxy_settings(p1, p2, ban_time=1),
        )
        procs.append(w)
        r.lpush(K.start_urls, json.dumps({"url": site.url, **SEED}))
        assert w.wait(180) == 0, w.log()[-3000:]
        log = w.log()
        assert "All 2 proxies are banned; requests wait" in log
        assert "Proxies usable again" in log
        assert sorted(i["url"] for i in items(r)) == sorted({site.url, *site.doc_urls()})
        assert r.llen(K.dead) == 0
        assert any(ban for *_, ban in site.via_log())


def sticky_choice(group: str, proxies: list[str]) -> str:
    """The proxy PROXY_MODE=host gives ``group`` (proxies/pool.py: rendezvous hashing)."""
    key = group.encode()
    return max(proxies, key=lambda p: zlib.crc32(key + b"|" + proxy_name(p).encode()))


def test_sticky_proxies_per_host_and_a_failing_proxy_is_banned(redis_url, r, tmp_path, procs):
    with (
        TestProxy("p1") as p1,
        TestProxy("p2") as p2,
        WildSite(docs=12) as a,
        WildSite(docs=12) as b,
    ):
        # A dead proxy (nothing listens there) that site a's host is given first.
        while True:
            dead = f"http://127.0.0.1:{free_port()}"
            if sticky_choice(urlsplit(a.url).netloc, [dead, p1.url, p2.url]) == dead:
                break
        w = worker(
            "w",
            redis_url,
            tmp_path,
            "MAX_IDLE_TIME_BEFORE_CLOSE=3",
            "RETRY_TIMES=4",
            "PROXY_MODE=host",
            "PROXY_MAX_FAILURES=2",
            "PROXIES=" + ",".join((dead, p1.url, p2.url)),
            "PROXY_BAN_TIME=600",
            "RETRY_BACKOFF_BASE=0.1",
        )
        procs.append(w)
        r.lpush(K.start_urls, *(json.dumps({"url": s.url, **SEED}) for s in (a, b)))
        assert w.wait(180) == 0, w.log()[-3000:]
        stored = {i["url"] for i in items(r)}
        for site in (a, b):
            assert {site.url, *site.doc_urls()} <= stored
            # One proxy per host (the dead one was banned before any page got through).
            assert len({via for *_, via, _ in site.via_log()}) == 1, site.via_log()
        assert stat(r, w, f"proxies/bans/{proxy_name(dead)}") == 1
        assert "2 connection failures in a row" in w.log()
        assert r.llen(K.dead) == 0
