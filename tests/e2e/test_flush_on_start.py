"""SCHEDULER_FLUSH_ON_START empties the frontier and the dupefilter, with a real worker."""

from __future__ import annotations

import json

import pytest

from tests.support.processes import K, worker
from tests.support.site import TestSite

pytestmark = pytest.mark.slow


def item_urls(r) -> set[str]:
    return {json.loads(x)["url"] for x in r.lrange(K.items, 0, -1)}


def test_flush_on_start_empties_the_frontier(redis_url, r, tmp_path, procs):
    junk_host = "127.0.0.1:9"
    junk = ["junk-fingerprint-1", "junk-fingerprint-2", "junk-fingerprint-3"]
    with TestSite(pages=30, seed=19, dead_links=False, offsite_links=False) as site:
        r.sadd(K.dupefilter, *junk)
        # Two members of the sorted set: the same request, spelt two ways.
        never = [
            '{"url": "http://127.0.0.1:9/never"}',
            '{"url":"http://127.0.0.1:9/never"}',
        ]
        r.zadd(K.host_queue(junk_host), {entry: i for i, entry in enumerate(never)})
        r.zadd(K.hosts, {junk_host: 0})
        r.incrby(K.requests_size, 2)
        r.lpush(K.start_urls, site.url)
        w = worker(
            "w",
            redis_url,
            tmp_path,
            "SCHEDULER_FLUSH_ON_START=true",
            "MAX_IDLE_TIME_BEFORE_CLOSE=2",
        )
        procs.append(w)
        assert w.wait(90) == 0, w.log()[-3000:]
        assert item_urls(r) == site.page_urls()
        assert not any(path == "/never" for _, _, path, _ in site.request_log())
    assert not r.exists(K.host_queue(junk_host))
    assert not any(r.sismember(K.dupefilter, j) for j in junk)
    assert "SCHEDULER_FLUSH_ON_START" in w.log()
