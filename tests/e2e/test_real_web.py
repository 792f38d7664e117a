"""The real web's traps, on a local site (tests.support.wild): real workers, real Redis."""

from __future__ import annotations

import json

import orjson
import pytest

from tests.support.processes import K, stat, worker
from tests.support.wild import WildSite

pytestmark = pytest.mark.slow


def buffered_urls(r) -> list[str]:
    """URLs of the items in the buffer (no db_writer runs here)."""
    return [orjson.loads(e)["item"]["url"] for e in r.lrange(K.items, 0, -1)]


def pages_requested(site: WildSite) -> list[str]:
    return [p for _, p, _ in site.log() if p != "/robots.txt"]


def test_tracking_variants_are_fetched_once(redis_url, r, tmp_path, procs):
    with WildSite(docs=16) as site:
        r.lpush(K.start_urls, json.dumps({"url": site.url, "deny": ["/cal/"]}))
        w = worker("w", redis_url, tmp_path, "MAX_IDLE_TIME_BEFORE_CLOSE=2")
        procs.append(w)
        assert w.wait(120) == 0, w.log()[-3000:]
        docs = site.requested("/docs/")
        assert docs == {f"/docs/{n}": 1 for n in range(1, 16)}, docs
        assert site.requested("/cal/") == {}
        assert stat(r, w, "seeds/denied") == 1
        urls = buffered_urls(r)
        assert len(urls) == len(set(urls))
        assert site.doc_urls() <= set(urls)


def test_a_seed_can_keep_its_tracking_parameters(redis_url, r, tmp_path, procs):
    with WildSite(docs=4) as site:
        seed = {"url": f"{site.url}docs/1?utm_source=x", "strip_params": False, "deny": ["/cal/"]}
        r.lpush(K.start_urls, json.dumps(seed))
        w = worker("w", redis_url, tmp_path, "MAX_IDLE_TIME_BEFORE_CLOSE=2")
        procs.append(w)
        assert w.wait(120) == 0, w.log()[-3000:]
        docs = site.requested("/docs/")
        assert docs["/docs/1?utm_source=x"] == 1
        assert docs["/docs/2?utm_campaign=c1&fbclid=x"] == 1
        assert docs["/docs/2"] == 1


def test_an_endless_calendar_stops_at_the_seeds_max_pages_across_two_workers(
    redis_url, r, tmp_path, procs
):
    budget = 30
    with WildSite(docs=4, latency=0.01) as site:
        workers = [
            worker(f"w{i}", redis_url, tmp_path, "MAX_IDLE_TIME_BEFORE_CLOSE=3") for i in (1, 2)
        ]
        procs += workers
        r.lpush(K.start_urls, json.dumps({"url": site.url, "max_pages": budget}))
        for w in workers:
            assert w.wait(180) == 0, w.log()[-3000:]
        requested = pages_requested(site)
        assert len(requested) == budget, requested
        assert sum(1 for p in requested if p.startswith("/cal/")) > 10
        assert int(r.get(K.seed_pages(_seed_id(r)))) > budget
        assert sum(stat(r, w, "seeds/over_budget") for w in workers) >= 1
        assert len(buffered_urls(r)) <= budget
        assert r.zcard(K.leases) == 0 and int(r.get(K.requests_size) or 0) == 0


def _seed_id(r) -> str:
    keys = [k.decode() for k in r.scan_iter(match="distributed:seed:*:pages")]
    assert len(keys) == 1, keys
    return keys[0].split(":")[2]


def test_an_endless_calendar_stops_at_the_seeds_max_depth(redis_url, r, tmp_path, procs):
    with WildSite(docs=4) as site:
        r.lpush(K.start_urls, json.dumps({"url": site.url, "max_depth": 3}))
        w = worker("w", redis_url, tmp_path, "MAX_IDLE_TIME_BEFORE_CLOSE=2")
        procs.append(w)
        assert w.wait(120) == 0, w.log()[-3000:]
        # Depth 1: 2024-1; 2: its neighbours; 3: theirs (2023-11 and 2024-3).
        assert set(site.requested("/cal/")) == {
            "/cal/2024/1",
            "/cal/2023/12",
            "/cal/2024/2",
            "/cal/2023/11",
            "/cal/2024/3",
        }
        assert stat(r, w, "seeds/too_deep") >= 2


def test_long_and_self_repeating_links_are_not_followed(redis_url, r, tmp_path, procs):
    for limit, loop in ((0, ["/loop/", "/loop/a/", "/loop/a/a/", "/loop/a/a/a/"]), (31, None)):
        with WildSite(docs=2) as site:
            r.lpush(K.start_urls, json.dumps({"url": site.url, "deny": ["/cal/"]}))
            if loop is None:  # http://127.0.0.1:<5 digits>/loop/a/ is 30 characters
                loop = ["/loop/", "/loop/a/"] if len(site.url) == 23 else None
            w = worker(
                f"w{limit}",
                redis_url,
                tmp_path,
                "MAX_IDLE_TIME_BEFORE_CLOSE=2",
                f"URL_MAX_LENGTH={limit}",
            )
            procs.append(w)
            assert w.wait(120) == 0, w.log()[-3000:]
            if loop is not None:
                assert sorted(site.requested("/loop/")) == loop
            trap = "scope/url_too_long" if limit else "scope/repeated_segments"
            assert stat(r, w, trap) >= 1
