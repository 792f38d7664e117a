"""The frontier's and the politeness Lua scripts against a real redis-server.

Every time-based script runs at a time the test sets (``now``, its first
argument; production passes "" for Redis' own clock), so no test sleeps to
cross a deadline and every wait is exact.
"""

import hashlib
import logging

import pytest
from scrapy import Request

from spiders_project.frontier.calls import (
    SEED_TAKEN_MS,
    ack_call,
    enqueue_call,
    expired_call,
    lease_call,
    requeue_call,
    seed_digest,
)
from spiders_project.frontier.dupefilter import FingerprintDupeFilter
from spiders_project.frontier.lease_id import Lease, build, prefix
from spiders_project.frontier.scripts import FrontierScripts
from spiders_project.frontier.seen import SeenConfig
from spiders_project.keys import RENDER, RedisKeys
from spiders_project.politeness.turns import LUA_DIR as POLITENESS_LUA
from spiders_project.redis_access import RedisState, SyncRedisCalls, load_lua
from spiders_project.spiders.distributed import DistributedSpider
from tests.support.crawlers import project_crawler

K = RedisKeys("t")
# The scripts' clock at the start of each test (ms since the epoch).
T0 = 1_700_000_000_000


class Scripts:
    """The frontier scripts run through the blocking call path, as the commands run them."""

    def __init__(self, r) -> None:
        state = RedisState("redis://test", 0.01, 0.1, logging.getLogger("test"))
        self.calls = SyncRedisCalls(r, state)
        self.scripts = FrontierScripts()
        self.next_id = 0
        self.last_ids: list[bytes] = []
        self.now = T0

    def tick(self, ms: int) -> None:
        """Step the scripts' clock forward."""
        self.now += ms

    def __getattr__(self, name):
        if name in ("gate", "pause_host"):
            script = load_lua(POLITENESS_LUA, name)
        else:
            script = getattr(self.scripts, name)
        return lambda keys, args: self.calls.script(script, keys, args)


@pytest.fixture
def s(r):
    return Scripts(r)


SEEN = SeenConfig("exact", 1, 0.5)


def tok(name: str) -> str:
    """The seen-set's token of a fingerprint named ``name`` ("!name": a seed's)."""
    force, name = ("!", name[1:]) if name.startswith("!") else ("", name)
    return force + SEEN.token(hashlib.sha1(name.encode()).digest()) if name else ""


def recorded(r, name: str) -> bool:
    """Whether the seen-set holds ``name`` (level 0: these tests hold few)."""
    root, v = tok(name).split()
    return bool(r.sismember(f"{K.seen}:0:{root}", v))


def enqueue(s, entries):
    entries = [(host, tok(fp), *rest) for host, fp, *rest in entries]
    keys, args = enqueue_call(K, entries, now=s.now)
    added, *rejected = s.enqueue(keys, args)
    assert rejected == []
    return added


def lease(s, want, candidates, ms=60_000, per_host=100, owner="w1"):
    """Lease with the given (host, delay) candidates; returns (members, hosts, next, wait).

    The lease ids of the call are left in ``s.last_ids``.
    """
    keys, args = lease_call(
        K,
        want,
        ms,
        candidates,
        next_hosts=100,
        per_host=per_host,
        owner=owner,
        first_id=s.next_id,
        now=s.now,
    )
    s.next_id += max(want, 0)
    leased, nxt, wait, s.full, s.spares, s.contest, _ = s.lease(keys, args)
    s.last_ids = leased[::3]
    return leased[1::3], [h.decode() for h in leased[2::3]], [h.decode() for h in nxt], wait


def queued(r, host: str) -> int:
    """Requests in a host's queue: its sorted set and its list."""
    return r.zcard(K.host_queue(host)) + r.llen(K.host_list(host))


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
    assert recorded(r, "fp1") and recorded(r, "fp2") and int(r.get(K.seen)) == 2
    assert enqueue(s, [("b", "fp2", 0, b"b3")]) == 0
    assert int(r.get(K.requests_size)) == 4
    assert queued(r, "a") == 3 and queued(r, "b") == 1
    assert set(r.zrange(K.hosts, 0, -1)) == {b"a", b"b"}


def test_seed_fingerprint_is_recorded_but_never_filters(r, s):
    assert enqueue(s, [("h", "fpS", 0, b"seed")]) == 1
    assert enqueue(s, [("h", "!fpS", 0, b"seed-again")]) == 1
    assert recorded(r, "fpS") and int(r.get(K.seen)) == 1


def test_a_shard_queues_a_seed_once_within_its_window(r, s):
    """On a sharded frontier a seed is removed from start_urls after its
    request is queued in its host's shard; the shard remembers the seed's
    digest, so a worker that read the entry before that removal (or after a
    worker killed in between) does not queue it again."""
    shard = RedisKeys("t", cluster=True, shards=3).for_host("h")
    seed = seed_digest(b"https://h/")

    def enqueue_seed(payload: bytes) -> int:
        keys, args = enqueue_call(shard, [("h", tok("!fpS"), 0, payload, seed)], now=s.now)
        return s.enqueue(keys, args)[0]

    assert enqueue_seed(b"seed") == 1
    s.tick(1000)
    assert enqueue_seed(b"seed-read-again") == 0
    assert r.zcard(shard.seeds_taken) == 1
    assert r.zcard(shard.host_queue("h")) == 1
    # Past the window it is a new seeding: queued again, the old mark swept.
    s.tick(SEED_TAKEN_MS)
    assert enqueue_seed(b"seed-pushed-later") == 1
    assert r.zrange(shard.seeds_taken, 0, -1, withscores=True) == [(seed, s.now)]
    assert r.zcard(shard.host_queue("h")) == 2


def test_size_counts_members_really_added(r, s):
    """A seed pushed three times, or a transaction resent after a lost reply,
    adds one member: the counter must not drift above the queues' contents."""
    for _ in range(3):
        enqueue(s, [("h", "!fpS", 0, b"seed")])
    assert int(r.get(K.requests_size)) == 1 == queued(r, "h")
    keys, args = enqueue_call(K, [("h", "", 0, b"x"), ("h", "", 0, b"x")], now=s.now)
    assert s.enqueue(keys, args) == [1] and s.enqueue(keys, args) == [0]
    assert int(r.get(K.requests_size)) == 2 == queued(r, "h")


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
    # The first call (want 10) used ids 0-9 though it leased nothing: never reused.
    assert s.last_ids == [b"w1/10", b"w1/11", b"w1/12"]
    assert r.zcard(K.hosts) == 0, "empty hosts without delay are forgotten"


def test_a_lease_call_reads_the_fields_it_is_given_after_its_leases(r, s):
    """Hashes passed after the script's own keys come back, field by field, as the
    reply's last element (a shared cookie jar's version: frontier/context.LeaseRead),
    read after the call's leases; a missing field or hash is nil."""
    enqueue(s, [("a", tok("r1"), 0, b"A1")])
    r.hset("jar:1", mapping={"~v": "7", "x": "y"})
    reads = [("jar:1", "~v"), ("jar:2", "~v"), ("jar:1", "x")]
    keys, args = lease_call(
        K, 1, 60_000, [("a", 0)], 10, 10, "w1", s.next_id, now=s.now, reads=reads
    )
    leased, *_, values = s.lease(keys, args)
    assert leased[1::3] == [b"A1"]
    assert values == [b"7", None, b"y"]


def test_lease_ids_are_what_lease_id_py_builds_and_parses(s):
    """The script names its leases "<prefix>/<n>" from the prefix the caller
    gives (lease_id.prefix); the module parses them back to their queue."""
    keys = RedisKeys("t", cluster=True, shards=3).for_host("h").in_lane(RENDER)
    call_keys, args = enqueue_call(keys, [("h", tok("r1"), 0, b"R1")], now=s.now)
    assert s.enqueue(call_keys, args) == [1]
    call_keys, args = lease_call(
        keys,
        1,
        60_000,
        [("h", 0)],
        next_hosts=10,
        per_host=10,
        owner=prefix("vm:1:ab", keys.shard, RENDER),
        first_id=7,
        now=s.now,
    )
    (lease_id, member, host), *_ = s.lease(call_keys, args)
    assert lease_id.decode() == build("vm:1:ab", keys.shard, RENDER, 7)
    lease = Lease.of(lease_id, member, host.decode())
    assert (lease.owner, lease.shard, lease.lane, lease.host) == (
        "vm:1:ab",
        keys.shard,
        RENDER,
        "h",
    )


def test_hosts_take_turns_so_a_big_site_never_starves_a_small_one(s):
    enqueue(s, [("big", str(i), 0, f"B{i}".encode()) for i in range(50)])
    enqueue(s, [("small", f"s{i}", 0, f"S{i}".encode()) for i in range(3)])
    _, _, candidates, _ = lease(s, 0, [])
    assert candidates == ["big", "small"]
    s.tick(2)
    _, hosts, candidates, _ = lease(s, 2, [("big", 0), ("small", 0)], per_host=2)
    assert hosts == ["big", "big"]
    assert candidates == ["small", "big"], "a served host goes to the back"
    s.ack(*ack_call(K, s.last_ids, now=s.now))  # big's two slots are free again
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
    assert members == [] and wait == 300
    s.tick(300)
    members, _, nxt, wait = lease(s, 10, [("slow", 300)])
    assert members == [b"S1"]


def test_site_asked_delay_wins_over_a_shorter_configured_one(r, s):
    r.hset(K.host_delays, "h", 500)
    enqueue(s, [("h", str(i), 0, f"H{i}".encode()) for i in range(2)])
    lease(s, 0, [])
    assert lease(s, 10, [("h", 0)])[0] == [b"H0"]
    assert lease(s, 10, [("h", 0)])[3] == 500


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
    (lease_id,) = s.last_ids
    keys, args = expired_call(K, 100, now=s.now)
    assert s.expired(keys, args) == [[], []]
    s.tick(50)
    found, rejected = s.expired(*expired_call(K, 100, now=s.now))
    assert found == [lease_id, b"a"] and rejected == []
    rk, ra = requeue_call(K, [(lease_id, "a")], expired=True, now=s.now)
    assert s.requeue(rk, ra) == 1
    assert s.requeue(rk, ra) == 0, "a second reclaimer moves nothing"
    assert r.zcard(K.leases) == 0 and r.hlen(K.lease_info) == 0
    assert int(r.get(K.requests_size)) == 3
    assert drain(s, "a") == [b"A", b"B"]


def test_reclaim_rechecks_the_deadline_in_the_same_step(r, s):
    """A lease listed as expired but renewed before the move stays with its holder."""
    enqueue(s, [("a", "1", 0, b"A")])
    lease(s, 0, [])
    lease(s, 1, [("a", 0)], ms=50)
    (lease_id,) = s.last_ids
    s.tick(50)
    found, _ = s.expired(*expired_call(K, 100, now=s.now))
    assert found == [lease_id, b"a"]
    assert s.renew([K.leases], [s.now, 60_000, lease_id]) == 1  # its worker was alive after all
    assert s.requeue(*requeue_call(K, [(lease_id, "a")], expired=True, now=s.now)) == 0
    assert r.zcard(K.leases) == 1 and queued(r, "a") == 0


def test_a_stalled_worker_touches_only_its_own_leases(r, s):
    """Worker 1's lease expires and worker 2 leases the request again: worker 1's
    late ack, renew and hand-back find nothing of worker 2's."""
    enqueue(s, [("a", "1", 0, b"A")])
    lease(s, 0, [])
    lease(s, 1, [("a", 0)], ms=50, owner="w1")
    (old,) = s.last_ids
    s.tick(50)
    found, _ = s.expired(*expired_call(K, 100, now=s.now))
    assert s.requeue(*requeue_call(K, [(old, "a")], expired=True, now=s.now)) == 1
    assert lease(s, 1, [("a", 0)], owner="w2")[0] == [b"A"]
    (new,) = s.last_ids
    assert new.startswith(b"w2/") and new != old
    assert s.renew([K.leases], [s.now, 60_000, old]) == 0
    assert s.requeue(*requeue_call(K, [(old, "a")], expired=False, now=s.now)) == 0
    assert s.ack(*ack_call(K, [old], now=s.now)) == 0
    assert r.zrange(K.leases, 0, -1) == [new] and r.hexists(K.lease_info, new)
    assert int(r.get(K.requests_size)) == 0


def test_a_lease_without_info_is_set_aside(r, s):
    r.zadd(K.leases, {b"orphan": 1})
    found, rejected = s.expired(*expired_call(K, 100, now=s.now))
    assert found == [] and rejected == [b"orphan"]
    assert r.zcard(K.leases) == 0
    assert any(b"orphan" in entry for entry in r.lrange(K.requests_rejected, 0, -1))


def test_a_lease_of_the_previous_release_goes_back(r, s):
    """Before lease ids, the member was the request and the info "<score> <host>"."""
    r.zadd(K.leases, {b'{"url":"http://a/"}': 1})
    r.hset(K.lease_info, b'{"url":"http://a/"}', "7 a")
    found, _ = s.expired(*expired_call(K, 100, now=s.now))
    assert found == [b'{"url":"http://a/"}', b"a"]
    assert s.requeue(*requeue_call(K, [(found[0], "a")], expired=True)) == 1
    assert r.zrange(K.host_queue("a"), 0, -1, withscores=True) == [(b'{"url":"http://a/"}', 7)]


def test_hand_back_of_a_payload_already_queued_counts_once(r, s):
    enqueue(s, [("a", "", 0, b"A")])
    lease(s, 0, [])
    lease(s, 1, [("a", 0)])
    (lease_id,) = s.last_ids
    enqueue(s, [("a", "", 0, b"A")])  # the same request queued again meanwhile
    assert s.requeue(*requeue_call(K, [(lease_id, "a")], expired=False, now=s.now)) == 0
    assert int(r.get(K.requests_size)) == 1 == queued(r, "a")
    assert r.zcard(K.leases) == 0 and r.hlen(K.lease_info) == 0


def test_renew_keeps_a_live_workers_lease(r, s):
    enqueue(s, [("a", "1", 0, b"A"), ("a", "2", 0, b"B")])
    lease(s, 0, [])
    lease(s, 2, [("a", 0)], ms=50)
    first, second = s.last_ids
    assert s.renew([K.leases], [s.now, 60_000, first, b"gone"]) == 1
    s.tick(50)
    assert s.expired(*expired_call(K, 100, now=s.now)) == [[second, b"a"], []]


def test_ack_ends_the_lease(r, s):
    enqueue(s, [("a", "1", 0, b"A")])
    lease(s, 0, [])
    lease(s, 1, [("a", 0)])
    assert s.ack(*ack_call(K, s.last_ids, now=s.now)) == 1
    assert r.zcard(K.leases) == 0 and r.hlen(K.lease_info) == 0


def test_gate_spaces_sends_and_forgets_the_host_afterwards(r, s):
    keys = [K.host_turn("h"), K.host_delays]
    assert s.gate(keys, [s.now, "h", 200, 0]) == 0
    s.tick(120)
    assert s.gate(keys, [s.now, "h", 200, 0]) == 80
    s.tick(80)
    assert s.gate(keys, [s.now, "h", 200, 0]) == 0
    # Nothing is kept for a host the crawl left: the turn expires a minute after its delay.
    assert 0 < r.pttl(K.host_turn("h")) <= 200 + 60_000


def test_a_forgotten_host_forgets_its_delay_until_a_worker_says_it_again(r, s):
    r.hset(K.host_delays, "h", 500)
    enqueue(s, [("h", "1", 0, b"H")])
    lease(s, 0, [])
    lease(s, 1, [("h", 0)])
    lease(s, 1, [("h", 0)])  # its turn passes with an empty queue: forgotten
    s.tick(500)
    lease(s, 1, [("h", 0)])
    assert not r.hexists(K.host_delays, "h")
    s.gate([K.host_turn("h"), K.host_delays], [s.now, "h", 0, 500])
    assert int(r.hget(K.host_delays, "h")) == 500


def test_dupefilter_uses_scrapys_request_fingerprinter(redis_url, r):
    crawler = project_crawler(DistributedSpider, {"REDIS_URL": redis_url})
    df = FingerprintDupeFilter.from_crawler(crawler)
    request = Request("http://example.com/a?b=2&a=1")
    expected = crawler.request_fingerprinter.fingerprint(request).hex()
    assert df.request_fingerprint(request) == expected
    assert df.request_seen(request) is False
    assert df.request_seen(Request("http://example.com/a?a=1&b=2")) is True
    seen = RedisKeys("distributed").seen
    assert int(r.get(seen)) == 1
    root, v = SEEN.token(bytes.fromhex(expected)).split()
    assert r.smembers(f"{seen}:0:{root}") == {v.encode()}
    df.close("finished")
    assert r.exists(seen), "close() must not wipe shared state"
    df.clear()
    assert r.keys("distributed:seen*") == [] and df.request_seen(request) is False


def test_a_host_queue_of_the_wrong_type_harms_only_itself(r, s):
    enqueue(s, [("good", "1", 0, b"G")])
    r.set(K.host_queue("bad"), "not a sorted set")
    r.zadd(K.hosts, {"bad": 0})
    members, _, _, _ = lease(s, 10, [("bad", 0), ("good", 0)])
    assert members == [b"G"]
    assert r.zscore(K.hosts, "bad") is None
    (entry,) = r.lrange(K.requests_rejected, 0, -1)
    assert entry.startswith(b"host bad: WRONGTYPE")


def test_new_priority_0_links_go_to_the_hosts_list_and_the_rest_to_its_sorted_set(r, s):
    enqueue(s, [("h", "f1", 0, b"link"), ("h", "!f2", 0, b"seed"), ("h", "", 0, b"again")])
    enqueue(s, [("h", "f3", 2, b"high"), ("h", "f4", 0, b"retry", b"", 500)])
    assert r.lrange(K.host_list("h"), 0, -1) == [b"link"]
    assert r.zrange(K.host_queue("h"), 0, -1) == [b"high", b"seed", b"again"]
    assert r.zcard(K.host_later("h")) == 1 and int(r.get(K.requests_size)) == 5
    assert drain(s, "h") == [b"high", b"link", b"seed", b"again"]


def test_links_and_other_requests_of_one_call_keep_the_calls_order(r, s):
    """Links go to the script as three arguments and the rest in full (with
    their place): the order of the call still decides what a repeated
    fingerprint does and each request's place in the sorted set."""
    entries = [
        ("h", tok("f1"), 0, b"link-1"),
        ("h", "", 0, b"never-filtered"),  # sorted set, after link-1 in the order
        ("h", tok("f1"), 0, b"link-1-again"),  # seen: dropped
        ("h", tok("!f2"), 0, b"seed-2"),  # recorded, queued whatever was seen
        ("h", tok("f2"), 0, b"link-2"),  # after its seed: seen, dropped
        ("h", tok("f3"), 0, b"link-3"),
        ("h", tok("!f3"), 0, b"seed-3"),  # after its link: queued too
    ]
    keys, args = enqueue_call(K, entries, now=s.now)
    full = args[5]  # after now, seen, window, H and the one host
    assert full == 3 and len(args) == 6 + 7 * full + 3 * 4  # four links of three arguments
    assert s.enqueue(keys, args) == [5]
    assert r.lrange(K.host_list("h"), 0, -1) == [b"link-1", b"link-3"]
    scores = dict(r.zrange(K.host_queue("h"), 0, -1, withscores=True))
    # Scores are the sequence of the requests added, in the call's order.
    assert scores[b"never-filtered"] < scores[b"seed-2"] < scores[b"seed-3"]
    assert scores[b"seed-3"] - scores[b"never-filtered"] == 3  # link-3 took one between
    assert int(r.get(K.requests_size)) == 5 and int(r.get(K.seen)) == 3


def test_a_leased_link_put_back_is_the_next_one_leased(r, s):
    enqueue(s, [("a", f"f{i}", 0, f"L{i}".encode()) for i in range(3)])
    lease(s, 0, [])
    assert lease(s, 1, [("a", 0)], ms=50)[0] == [b"L0"]
    (lease_id,) = s.last_ids
    assert r.hget(K.lease_info, lease_id).startswith(b"L 1 a")
    s.tick(50)
    assert s.requeue(*requeue_call(K, [(lease_id, "a")], expired=True, now=s.now)) == 1
    assert r.lrange(K.host_list("a"), 0, -1) == [b"L0", b"L1", b"L2"]
    assert int(r.get(K.requests_size)) == 3
    assert drain(s, "a") == [b"L0", b"L1", b"L2"]


def test_a_host_list_of_the_wrong_type_loses_nothing_taken_before_it(r, s):
    """The sorted set's higher priorities are popped before the list fails:
    they are leased, not dropped, and the host is set aside."""
    enqueue(s, [("bad", "f1", 3, b"P"), ("good", "f2", 0, b"G")])
    r.set(K.host_list("bad"), "not a list")
    members, _, _, _ = lease(s, 10, [("bad", 0), ("good", 0)])
    assert members == [b"P", b"G"]
    assert r.zscore(K.hosts, "bad") is None
    (entry,) = r.lrange(K.requests_rejected, 0, -1)
    assert entry.startswith(b"host bad: WRONGTYPE")


# --- the cluster-wide cap of a host's requests in flight ------------------------------
def test_a_host_at_its_cap_gives_nothing_until_a_lease_ends(r, s):
    enqueue(s, [("a", "", 0, bytes([65 + i])) for i in range(6)])
    lease(s, 0, [])
    got, *_ = lease(s, 10, [("a", 0)], per_host=4)
    assert len(got) == 4 and int(r.hget(K.in_flight, "a")) == 4
    first_ids = s.last_ids
    # Another worker asks: the host is at its cap, and leaves the ready-set.
    got, _, nxt, _ = lease(s, 10, [("a", 0)], per_host=4, owner="w2")
    assert got == [] and nxt == [] and r.hget(K.cap_waiters, "a") == b"w2"
    # One lease ends: the host is ready again, with one slot.
    assert s.ack(*ack_call(K, first_ids[:1], now=s.now)) == 1
    assert r.zscore(K.hosts, "a") == s.now and not r.hexists(K.cap_waiters, "a")
    got, *_ = lease(s, 10, [("a", 0)], per_host=4, owner="w2")
    assert len(got) == 1 and int(r.hget(K.in_flight, "a")) == 4
    # A dead worker's slots come back when its leases are put back.
    s.tick(60_001)
    found, _ = s.expired(*expired_call(K, 100, now=s.now))
    pairs = [(found[i], found[i + 1].decode()) for i in range(0, len(found), 2)]
    assert s.requeue(*requeue_call(K, pairs, expired=True, now=s.now)) == 4
    assert not r.hexists(K.in_flight, "a")
    # A late ack of a lease that expired and went back gives nothing back twice.
    assert s.ack(*ack_call(K, first_ids[1:], now=s.now)) == 0
    assert not r.hexists(K.in_flight, "a")


def test_a_retry_waits_in_the_later_set_until_its_time(r, s):
    keys, args = enqueue_call(K, [("a", "", 0, b"R", b"", 5000)], now=s.now)
    assert s.enqueue(keys, args) == [1]
    assert queued(r, "a") == 0 and r.zcard(K.host_later("a")) == 1
    assert int(r.get(K.requests_size)) == 1
    assert r.zscore(K.hosts, "a") == s.now + 5000
    # Not ready yet, even when asked for by name.
    assert lease(s, 10, [("a", 0)])[0] == []
    s.tick(4999)
    assert lease(s, 10, [("a", 0)])[0] == []
    s.tick(1)
    assert lease(s, 10, [("a", 0)])[0] == [b"R"]
    assert r.zcard(K.host_later("a")) == 0 and int(r.get(K.requests_size)) == 0


def test_a_host_with_only_waiting_retries_stays_ready_at_their_time(r, s):
    enqueue(s, [("a", "", 0, b"A")])
    keys, args = enqueue_call(K, [("a", "", 5, b"R", b"", 3000)], now=s.now)
    s.enqueue(keys, args)
    assert lease(s, 10, [("a", 0)])[0] == [b"A"]
    # The queue is empty, the retry is not due: the host waits for it.
    assert r.zscore(K.hosts, "a") == s.now + 3000
    s.tick(3000)
    assert lease(s, 10, [("a", 0)])[0] == [b"R"]
    assert not r.exists(K.host_later("a")) and r.zscore(K.hosts, "a") is None


def test_a_slot_comes_back_when_the_download_ends_and_the_lease_stays(r, s):
    enqueue(s, [("a", "", 0, bytes([65 + i])) for i in range(6)])
    lease(s, 0, [])
    got, *_ = lease(s, 10, [("a", 0)], per_host=2)
    ids = s.last_ids
    assert len(got) == 2 and s.full == [b"a"]  # the caller filled the host: releases are urgent
    assert lease(s, 10, [("a", 0)], per_host=2)[0] == []
    # The download of the first ends: its slot comes back, its lease stays.
    assert s.ack(*ack_call(K, [], releases=ids[:1], now=s.now)) == 0
    assert not r.hexists(K.cap_waiters, "a") and r.zscore(K.leases, ids[0]) is not None
    assert int(r.hget(K.in_flight, "a")) == 1
    # Released twice (a resent write tick), or released then acked: one slot, once.
    s.ack(*ack_call(K, [], releases=ids[:1], now=s.now))
    assert s.ack(*ack_call(K, ids[:1], now=s.now)) == 1
    assert int(r.hget(K.in_flight, "a")) == 1 and not r.exists(K.released)
    got, *_ = lease(s, 10, [("a", 0)], per_host=2)
    assert len(got) == 1
    # A released lease that expires goes back without giving its slot twice.
    s.ack(*ack_call(K, [], releases=ids[1:2], now=s.now))
    assert int(r.hget(K.in_flight, "a")) == 1
    s.tick(60_001)
    found, _ = s.expired(*expired_call(K, 100, now=s.now))
    pairs = [(found[i], found[i + 1].decode()) for i in range(0, len(found), 2)]
    assert s.requeue(*requeue_call(K, pairs, expired=True, now=s.now)) == 2
    assert not r.hexists(K.in_flight, "a") and not r.exists(K.released)


def test_a_freed_slot_goes_first_to_the_workers_that_waited_for_it(r, s):
    enqueue(s, [("a", "", 0, bytes([65 + i])) for i in range(6)])
    lease(s, 0, [])
    lease(s, 10, [("a", 0)], per_host=2, owner="w1")
    ids = s.last_ids
    # w2 finds the host at its cap, and is noted as waiting.
    assert lease(s, 10, [("a", 0)], per_host=2, owner="w2")[0] == []
    s.ack(*ack_call(K, [], releases=ids[:1], now=s.now))
    # w1, which gave the slot back, neither gets the host nor sees it for 30 ms.
    got, _, nxt, wait = lease(s, 10, [("a", 0)], per_host=2, owner="w1")
    assert got == [] and nxt == [] and wait == 30
    # w2 asks within that time and gets it; the hand-over is done.
    s.tick(20)
    got, _, _, _ = lease(s, 10, [("a", 0)], per_host=2, owner="w2")
    assert len(got) == 1 and not r.exists(K.cap_handover)
    # A slot nobody else waited for goes to whoever asks, its giver included.
    s.ack(*ack_call(K, [], releases=ids[1:], now=s.now))
    assert len(lease(s, 10, [("a", 0)], per_host=2, owner="w1")[0]) == 1
    mine = s.last_ids
    # A hand-over nobody takes ends after 30 ms.
    assert lease(s, 10, [("a", 0)], per_host=2, owner="w2")[0] == []
    s.ack(*ack_call(K, [], releases=mine, now=s.now))
    assert lease(s, 10, [("a", 0)], per_host=2, owner="w1")[0] == []
    s.tick(31)
    assert len(lease(s, 10, [("a", 0)], per_host=2, owner="w1")[0]) == 1
