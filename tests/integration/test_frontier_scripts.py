"""The frontier's Lua scripts against a real redis-server."""

import time

import pytest
from scrapy import Request
from scrapy.utils.test import get_crawler

from spiders_project.config import load_settings
from spiders_project.frontier.calls import (
    ack_commands,
    enqueue_call,
    expired_call,
    lease_call,
    requeue_call,
)
from spiders_project.frontier.dupefilter import FingerprintDupeFilter
from spiders_project.frontier.scripts import FrontierScripts
from spiders_project.keys import RedisKeys
from spiders_project.spiders.distributed import DistributedSpider

K = RedisKeys("t")


@pytest.fixture
def s(r):
    return FrontierScripts(r)


def enqueue(s, entries):
    keys, args = enqueue_call(K, entries)
    return s.enqueue(keys=keys, args=args)


def lease(s, want, candidates, ms=60_000, per_host=100):
    """Lease with the given (host, delay) candidates; returns (members, hosts, next, wait)."""
    keys, args = lease_call(K, want, ms, candidates, next_hosts=100, per_host=per_host)
    leased, nxt, wait = s.lease(keys=keys, args=args)
    return leased[::2], [h.decode() for h in leased[1::2]], [h.decode() for h in nxt], wait


def drain(s, host, want=100):
    lease(s, 0, [])
    return lease(s, want, [(host, 0)])[0]


def test_enqueue_dedups_in_one_call_and_counts(r, s):
    added = enqueue(
        s,
        [
            ("a", "fp1", 0, b"a"),
            ("a", "fp1", 0, b"a2"),
            ("b", "fp2", 0, b"b"),
            ("a", "", 0, b"c"),
            ("a", "", 0, b"c2"),
        ],
    )
    assert added == 4
    assert r.smembers(K.dupefilter) == {b"fp1", b"fp2"}
    assert enqueue(s, [("b", "fp2", 0, b"b3")]) == 0
    assert int(r.get(K.requests_size)) == 4
    assert r.zcard(K.host_queue("a")) == 3 and r.zcard(K.host_queue("b")) == 1
    assert set(r.zrange(K.hosts, 0, -1)) == {b"a", b"b"}


def test_seed_fingerprint_is_recorded_but_never_filters(r, s):
    assert enqueue(s, [("h", "fpS", 0, b"seed")]) == 1
    assert enqueue(s, [("h", "!fpS", 0, b"seed-again")]) == 1
    assert r.sismember(K.dupefilter, "fpS")


def test_priority_first_then_first_in_first_out_within_a_host(s):
    enqueue(s, [("h", f"f{i}", 0, f"low{i}".encode()) for i in range(3)])
    enqueue(s, [("h", "h0", 5, b"high0"), ("h", "h1", 5, b"high1"), ("h", "n", -3, b"neg")])
    enqueue(s, [("h", f"g{i}", 0, f"low{i + 3}".encode()) for i in range(2)])
    assert drain(s, "h") == [
        b"high0",
        b"high1",
        b"low0",
        b"low1",
        b"low2",
        b"low3",
        b"low4",
        b"neg",
    ]


def test_lease_returns_hosts_and_candidates(r, s):
    enqueue(s, [("a", "1", 0, b"A1"), ("a", "2", 0, b"A2"), ("b", "3", 0, b"B1")])
    members, hosts, nxt, wait = lease(s, 10, [])
    assert members == [] and sorted(nxt) == ["a", "b"]
    members, hosts, nxt, wait = lease(s, 10, [("a", 0), ("b", 0)])
    assert members == [b"A1", b"A2", b"B1"] and hosts == ["a", "a", "b"]
    assert nxt == [] and wait == -1
    assert int(r.get(K.requests_size)) == 0 and r.zcard(K.leases) == 3
    assert r.zcard(K.hosts) == 0, "empty hosts without delay are forgotten"


def test_hosts_take_turns_so_a_big_site_never_starves_a_small_one(s):
    enqueue(s, [("big", str(i), 0, f"B{i}".encode()) for i in range(50)])
    enqueue(s, [("small", f"s{i}", 0, f"S{i}".encode()) for i in range(3)])
    _, _, candidates, _ = lease(s, 0, [])
    assert candidates == ["big", "small"]
    time.sleep(0.002)
    _, hosts, candidates, _ = lease(s, 2, [("big", 0), ("small", 0)], per_host=2)
    assert hosts == ["big", "big"]
    assert candidates == ["small", "big"], "a served host goes to the back"
    _, hosts, _, _ = lease(s, 4, [("small", 0), ("big", 0)], per_host=2)
    assert hosts == ["small", "small", "big", "big"]


def test_a_delayed_host_gives_one_request_per_turn(r, s):
    enqueue(
        s,
        [("slow", str(i), 0, f"S{i}".encode()) for i in range(3)]
        + [("fast", f"f{i}", 0, f"F{i}".encode()) for i in range(3)],
    )
    members, _, nxt, _ = lease(s, 10, [("slow", 300), ("fast", 0)])
    assert members == [b"S0", b"F0", b"F1", b"F2"]
    assert nxt == [], "slow is not ready again yet"
    members, _, nxt, wait = lease(s, 10, [("slow", 300)])
    assert members == [] and 200 < wait <= 300
    time.sleep(0.32)
    members, _, nxt, wait = lease(s, 10, [("slow", 300)])
    assert members == [b"S1"]


def test_site_asked_delay_wins_over_a_shorter_configured_one(r, s):
    r.hset(K.host_delays, "h", 500)
    enqueue(s, [("h", str(i), 0, f"H{i}".encode()) for i in range(2)])
    lease(s, 0, [])
    assert lease(s, 10, [("h", 0)])[0] == [b"H0"]
    assert lease(s, 10, [("h", 0)])[3] > 400


def test_racing_workers_never_get_the_same_turn(s):
    enqueue(s, [("h", str(i), 0, f"H{i}".encode()) for i in range(5)])
    first = lease(s, 5, [("h", 1000)])[0]
    second = lease(s, 5, [("h", 1000)])[0]
    assert len(first) == 1 and second == []


def test_expired_leases_go_back_in_place_and_only_once(r, s):
    enqueue(s, [("a", "1", 1, b"A"), ("a", "2", 0, b"B"), ("b", "3", 0, b"C")])
    lease(s, 0, [])
    members, _, _, _ = lease(s, 1, [("a", 0)], ms=50)
    assert members == [b"A"]
    keys, args = expired_call(K, 100)
    assert s.expired(keys=keys, args=args) == []
    time.sleep(0.1)
    found = s.expired(keys=keys, args=args)
    assert found == [b"A", b"a"]
    leases = [(b"A", "a")]
    rk, ra = requeue_call(K, leases)
    assert s.requeue(keys=rk, args=ra) == 1
    assert s.requeue(keys=rk, args=ra) == 0, "a second reclaimer moves nothing"
    assert r.zcard(K.leases) == 0 and r.hlen(K.lease_info) == 0
    assert int(r.get(K.requests_size)) == 3
    assert drain(s, "a") == [b"A", b"B"]


def test_renew_keeps_a_live_workers_lease(r, s):
    enqueue(s, [("a", "1", 0, b"A"), ("a", "2", 0, b"B")])
    lease(s, 0, [])
    lease(s, 2, [("a", 0)], ms=50)
    assert s.renew(keys=[K.leases], args=[60_000, b"A", b"gone"]) == 1
    time.sleep(0.1)
    keys, args = expired_call(K, 100)
    assert s.expired(keys=keys, args=args) == [b"B", b"a"]


def test_ack_ends_the_lease(r, s):
    enqueue(s, [("a", "1", 0, b"A")])
    lease(s, 0, [])
    lease(s, 1, [("a", 0)])
    for command in ack_commands(K, [b"A"]):
        r.execute_command(*command)
    assert r.zcard(K.leases) == 0 and r.hlen(K.lease_info) == 0


def test_dupefilter_uses_scrapys_request_fingerprinter(redis_url, r):
    settings = {
        **load_settings({"REDIS_URL": redis_url}).copy_to_dict(),
        "TWISTED_REACTOR_ENABLED": False,
    }
    crawler = get_crawler(DistributedSpider, settings)
    df = FingerprintDupeFilter.from_crawler(crawler)
    request = Request("http://example.com/a?b=2&a=1")
    expected = crawler.request_fingerprinter.fingerprint(request).hex()
    assert df.request_fingerprint(request) == expected
    assert df.request_seen(request) is False
    assert df.request_seen(Request("http://example.com/a?a=1&b=2")) is True
    assert r.smembers(RedisKeys("distributed").dupefilter) == {expected.encode()}
    df.close("finished")
    assert r.exists(RedisKeys("distributed").dupefilter), "close() must not wipe shared state"
