"""Spare leases and slot transfers (lua/lease.lua, lua/ack.lua) against a real redis-server.

A worker that holds slots of a host leases spares, which hold no slot; the
slot of a download that ended passes to one of them (a transfer), and the
host's count of slots never moves for it.
"""

import pytest

from spiders_project.frontier.calls import ack_call, expired_call, requeue_call
from tests.integration.test_frontier_scripts import K, Scripts, enqueue, lease


@pytest.fixture
def s(r):
    return Scripts(r)


def setup_host(s, n=10):
    enqueue(s, [("a", "", 0, bytes([65 + i])) for i in range(n)])
    lease(s, 0, [])


def test_a_worker_that_fills_a_host_takes_spares_that_hold_no_slot(r, s):
    setup_host(s)
    # Spares come only with the slots this call gives (holds=False) ...
    got, *_ = lease(s, 2, [("a", 0, 3, False)], per_host=2)
    assert len(got) == 5 and len(s.spares) == 3 and s.contest == [b"a", 0]
    assert int(r.hget(K.in_flight, "a")) == 2 and r.scard(K.released) == 3
    assert int(r.get(K.requests_size)) == 5
    # ... or to a worker that holds slots, at the cap, with nothing else wanted.
    got, *_ = lease(s, 0, [("a", 0, 2, True)], per_host=2)
    assert len(got) == 2 and len(s.spares) == 2 and int(r.hget(K.in_flight, "a")) == 2
    # A worker holding none gets none, and waits.
    got, *_ = lease(s, 0, [("a", 0, 2, False)], per_host=2, owner="w2")
    assert got == []


def test_no_spares_of_a_host_with_a_delay(r, s):
    setup_host(s)
    got, *_ = lease(s, 1, [("a", 500, 3, True)], per_host=2)
    assert len(got) == 1 and s.spares == []


def test_a_transfer_keeps_the_count_and_the_spare_then_gives_it_back(r, s):
    setup_host(s)
    lease(s, 2, [("a", 0, 2, False)], per_host=2)
    slotted = [i for i in s.last_ids if i not in s.spares]
    spare = s.spares[0]
    # The first download ends: its slot passes to a spare.
    assert s.ack(*ack_call(K, [], transfers=[(slotted[0], spare)], now=s.now)) == 0
    assert int(r.hget(K.in_flight, "a")) == 2
    assert r.sismember(K.released, slotted[0]) and not r.sismember(K.released, spare)
    # Sent again (a lost reply): nothing moves.
    s.ack(*ack_call(K, [], transfers=[(slotted[0], spare)], now=s.now))
    assert int(r.hget(K.in_flight, "a")) == 2
    # Both acked: the spare's slot comes back with its ack, the first one's not twice.
    assert s.ack(*ack_call(K, [slotted[0], spare], now=s.now)) == 2
    assert int(r.hget(K.in_flight, "a")) == 1


def test_a_transfer_from_a_lease_that_lost_its_slot_takes_one(r, s):
    setup_host(s)
    lease(s, 1, [("a", 0, 1, False)], per_host=1)
    first, spare = s.last_ids
    assert s.spares == [spare]
    # The first lease's slot was given back already (released): the spare takes one.
    s.ack(*ack_call(K, [], releases=[first], now=s.now))
    assert not r.hexists(K.in_flight, "a")
    s.ack(*ack_call(K, [], transfers=[(first, spare)], now=s.now))
    assert int(r.hget(K.in_flight, "a")) == 1


def test_a_transfer_to_a_spare_that_is_gone_gives_the_slot_back(r, s):
    setup_host(s)
    lease(s, 1, [("a", 0, 1, False)], per_host=1)
    first, spare = s.last_ids
    s.ack(*ack_call(K, [spare], now=s.now))  # the spare ended (handed back, acked)
    assert int(r.hget(K.in_flight, "a")) == 1
    s.ack(*ack_call(K, [], transfers=[(first, spare)], now=s.now))
    assert not r.hexists(K.in_flight, "a")


def test_a_dead_workers_spares_go_back_without_giving_slots(r, s):
    setup_host(s)
    lease(s, 2, [("a", 0, 3, False)], per_host=2)
    s.tick(60_001)
    found, _ = s.expired(*expired_call(K, 100, now=s.now))
    pairs = [(found[i], found[i + 1].decode()) for i in range(0, len(found), 2)]
    assert s.requeue(*requeue_call(K, pairs, expired=True, now=s.now)) == 5
    assert not r.hexists(K.in_flight, "a") and not r.exists(K.released)
    assert int(r.get(K.requests_size)) == 10


def test_a_holders_calls_never_push_back_the_time_others_find_its_host(r, s):
    """A holder passing slots 10 ms from Redis calls lease more often than CAP_POLL
    (20 ms); each call once took the host out and put it back CAP_POLL later, so
    another worker never found it capped, never waited, and never got a share
    (tests/e2e/test_distance.py: one worker fetched all 401 pages, one none)."""
    setup_host(s, n=30)
    lease(s, 2, [("a", 0, 2, False)], per_host=2)  # w1 fills the host, with spares
    due = r.zscore(K.hosts, "a")
    assert due is not None and due <= s.now + 20
    for _ in range(5):  # w1's calls as its slots pass, 5 ms apart
        s.tick(5)
        lease(s, 0, [("a", 0, 2, True)], per_host=2)
        assert r.zscore(K.hosts, "a") == due
    # w2, polling, finds the host in the ready-set at its cap: it waits, and w1
    # hears of it in its next call (its share is then one slot of two).
    got, _, nxt, _ = lease(s, 10, [("a", 0)], per_host=2, owner="w2")
    assert got == [] and b"w2" in r.hget(K.cap_waiters, "a").split()
    lease(s, 0, [("a", 0, 2, True)], per_host=2)
    assert s.contest == [b"a", 1]
    assert r.zscore(K.hosts, "a") == s.now + 20  # back for the waiters' next poll
