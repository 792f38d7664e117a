"""The frontier's Lua scripts against a real redis-server."""

import time

import pytest
import redis
from scrapy import Request
from scrapy.utils.test import get_crawler

from spiders_project.config import load_settings
from spiders_project.frontier.dupefilter import FingerprintDupeFilter
from spiders_project.frontier.scripts import FrontierScripts
from spiders_project.keys import RedisKeys
from spiders_project.spiders.distributed import DistributedSpider

K = RedisKeys("t")


@pytest.fixture
def r(redis_url):
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


@pytest.fixture
def scripts(r):
    return FrontierScripts(r)


def enqueue(scripts, triples):
    argv = [x for t in triples for x in t]
    return scripts.enqueue(keys=[K.dupefilter, K.requests, K.requests_seq], args=argv)


def lease(scripts, n, ms=60_000):
    return scripts.lease(keys=[K.requests, K.leases, K.lease_scores], args=[n, ms])


def test_enqueue_dedups_in_one_call(r, scripts):
    added = enqueue(scripts, [("fp1", 0, b"a"), ("fp1", 0, b"a2"), ("fp2", 0, b"b"),
                              ("", 0, b"c"), ("", 0, b"c2")])
    assert added == 4
    assert r.smembers(K.dupefilter) == {b"fp1", b"fp2"}
    assert enqueue(scripts, [("fp2", 0, b"b3")]) == 0


def test_seed_fingerprint_is_recorded_but_never_filters(r, scripts):
    assert enqueue(scripts, [("fpS", 0, b"seed")]) == 1
    assert enqueue(scripts, [("!fpS", 0, b"seed-again")]) == 1
    assert r.sismember(K.dupefilter, "fpS")


def test_priority_first_then_first_in_first_out(scripts):
    enqueue(scripts, [(f"f{i}", 0, f"low{i}".encode()) for i in range(3)])
    enqueue(scripts, [("h0", 5, b"high0"), ("h1", 5, b"high1"), ("n", -3, b"neg")])
    enqueue(scripts, [(f"g{i}", 0, f"low{i + 3}".encode()) for i in range(2)])
    result = lease(scripts, 10)
    assert result[0] == 0
    assert result[1:] == [b"high0", b"high1", b"low0", b"low1", b"low2", b"low3", b"low4", b"neg"]


def test_lease_moves_to_leases_and_requeue_restores_position(r, scripts):
    enqueue(scripts, [("a", 1, b"A"), ("b", 0, b"B"), ("c", 0, b"C")])
    assert lease(scripts, 1, ms=50)[1:] == [b"A"]
    assert r.zcard(K.leases) == 1 and r.zcard(K.requests) == 2
    # Not expired yet: nothing moves.
    assert scripts.requeue(keys=[K.requests, K.leases, K.lease_scores], args=[100]) == 0
    time.sleep(0.1)
    assert scripts.requeue(keys=[K.requests, K.leases, K.lease_scores], args=[100]) == 1
    assert r.zcard(K.leases) == 0 and r.hlen(K.lease_scores) == 0
    assert lease(scripts, 3)[1:] == [b"A", b"B", b"C"]


def test_requeue_given_members_and_renew(r, scripts):
    enqueue(scripts, [("a", 0, b"A"), ("b", 0, b"B")])
    lease(scripts, 2, ms=50)
    assert scripts.renew(keys=[K.leases], args=[60_000, b"A", b"gone"]) == 1
    time.sleep(0.1)
    # Only B expired; A was renewed.
    assert scripts.requeue(keys=[K.requests, K.leases, K.lease_scores], args=[100]) == 1
    assert r.zrange(K.requests, 0, -1) == [b"B"]
    assert scripts.requeue(keys=[K.requests, K.leases, K.lease_scores], args=[0, b"A"]) == 1
    assert scripts.requeue(keys=[K.requests, K.leases, K.lease_scores], args=[0, b"A"]) == 0
    assert r.zrange(K.requests, 0, -1) == [b"A", b"B"]


def test_dupefilter_uses_scrapys_request_fingerprinter(redis_url, r):
    crawler = get_crawler(DistributedSpider, {**load_settings({"REDIS_URL": redis_url}).copy_to_dict(), "TWISTED_REACTOR_ENABLED": False})
    df = FingerprintDupeFilter.from_crawler(crawler)
    request = Request("http://example.com/a?b=2&a=1")
    expected = crawler.request_fingerprinter.fingerprint(request).hex()
    assert df.request_fingerprint(request) == expected
    assert df.request_seen(request) is False
    assert df.request_seen(Request("http://example.com/a?a=1&b=2")) is True
    assert r.smembers(RedisKeys("distributed").dupefilter) == {expected.encode()}
    df.close("finished")
    assert r.exists(RedisKeys("distributed").dupefilter), "close() must not wipe shared state"
