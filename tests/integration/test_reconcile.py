"""Counts a lost write left behind come back to what they count (lua/reconcile.lua).

Each test puts Redis in the state a write lost on one side leaves (a count
above what it counts, a lease whose info is gone, a host stuck at a cap no
lease holds), shows that the idle rule (``read_model/contract.py``) then
waits for good, and that the reconcile brings it back without touching a
frontier that has work. The last one runs a real worker on such a Redis: it
closes when idle.
"""

from __future__ import annotations

from spiders_project.frontier.calls import ack_call, expired_call, reconcile_call
from spiders_project.keys import RENDER
from spiders_project.keys.jobs import job_counts, job_held
from spiders_project.read_model.contract import work_of, work_reads
from tests.integration.test_frontier_scripts import K, Scripts, enqueue, lease
from tests.support.processes import K as WK
from tests.support.processes import published_stats, worker

R = K.in_lane(RENDER)
# WK: the keys of the spider a test worker runs ("distributed").


def work(r, keys=K):
    """The cluster's unfinished work as the idle rule reads it."""
    with r.pipeline(transaction=False) as pipe:
        for command in work_reads(keys):
            pipe.execute_command(*command)
        return work_of(pipe.execute())


def reconcile(s) -> list[str]:
    return [entry.decode() for entry in s.reconcile(*reconcile_call(K, now=s.now))]


def test_a_size_that_counts_no_queued_request_comes_back_to_zero(r):
    s = Scripts(r)
    enqueue(s, [("a", "1", 0, b"A")])
    assert lease(s, 5, [("a", 0)])[0] == [b"A"]
    assert s.ack(*ack_call(K, s.last_ids, now=s.now)) == 1
    assert work(r).idle and reconcile(s) == []
    # The lease's DECRBY lost, its ack kept: counted, and in no queue.
    r.incrby(K.requests_size, 1)
    r.set(R.requests_size, -2)  # a count below zero would hide others' work from the sum
    assert not work(r).idle
    assert sorted(reconcile(s)) == [f"{R.requests_size} -2", f"{K.requests_size} 1"]
    assert work(r).idle and r.get(K.requests_size) == b"0" and r.get(R.requests_size) == b"0"
    assert reconcile(s) == []


def test_a_negative_count_hides_no_request_queued_elsewhere(r):
    s = Scripts(r)
    enqueue(s, [("a", "1", 0, b"A")])
    r.set(R.requests_size, -1)
    assert work(r).queued == 1 and not work(r).idle


def test_a_lease_whose_info_was_lost_expires_and_its_slot_comes_back(r):
    s = Scripts(r)
    enqueue(s, [("a", "", 0, bytes([65 + i])) for i in range(3)])
    assert len(lease(s, 5, [("a", 0)], ms=1000, per_host=2)[0]) == 2
    held = s.last_ids
    assert lease(s, 5, [("a", 0)], per_host=2, owner="w2")[0] == []  # at its cap: w2 waits
    r.hdel(K.lease_info, *held)  # the infos lost, the leases kept
    # Their holder ends one (no info: no host to give its slot back to), the
    # other expires: the host keeps both slots with no lease to give them back.
    assert s.ack(*ack_call(K, held[:1], now=s.now)) == 1
    assert reconcile(s) == [], "a lease is still out: nothing to correct yet"
    s.tick(1000)
    found, rejected = s.expired(*expired_call(K, 100, now=s.now))
    assert found == [] and rejected == held[1:]
    assert r.zcard(K.leases) == 0 and int(r.hget(K.in_flight, "a")) == 2
    assert lease(s, 5, [("a", 0)], per_host=2, owner="w2")[0] == []
    assert not work(r).idle, "one request queued that nobody may lease, for good"
    assert sorted(reconcile(s)) == [f"{K.cap_waiters} a", f"{K.hosts} a", f"{K.in_flight} a=2"]
    got, *_ = lease(s, 5, [("a", 0)], per_host=2, owner="w2")
    assert got == [b"C"]
    assert s.ack(*ack_call(K, s.last_ids, now=s.now)) == 1
    assert work(r).idle and not r.exists(K.in_flight, K.cap_waiters)


def test_the_job_counts_of_an_empty_shard_come_back_to_zero(r):
    s = Scripts(r)
    counts = job_counts(K)
    r.hset(counts, mapping={"j1|queued": 2, "j1|leased": 1, "j1|slots": -1, "j1|later": 0})
    r.hset(counts, mapping={"j1|acked": 7, "j1|pages": 5, "default|leased": 3})
    # A paused job's request held in the render lane still counts as queued.
    r.zadd(job_held(R), {b"j1 5 1 aA": 0})
    assert reconcile(s) == []
    r.delete(job_held(R))
    assert sorted(reconcile(s)) == [
        f"{counts} default|leased=3",
        f"{counts} j1|leased=1",
        f"{counts} j1|queued=2",
        f"{counts} j1|slots=-1",
    ]
    assert r.hgetall(counts) == {
        b"j1|queued": b"0",
        b"j1|leased": b"0",
        b"j1|slots": b"0",
        b"j1|later": b"0",
        b"j1|acked": b"7",
        b"j1|pages": b"5",
        b"default|leased": b"0",
    }


def test_a_frontier_with_work_is_left_as_it_is(r):
    s = Scripts(r)
    enqueue(s, [("a", "", 0, bytes([65 + i])) for i in range(4)] + [("b", "", 0, b"Z")])
    assert len(lease(s, 5, [("a", 0)], per_host=2)[0]) == 2
    lease(s, 5, [("a", 0)], per_host=2, owner="w2")  # a waiter
    r.hset(job_counts(K), "default|queued", 99)  # wrong, but requests are queued
    keys = [K.requests_size, K.in_flight, K.cap_waiters, K.hosts, K.leases, job_counts(K)]
    before = {key: r.dump(key) for key in keys}
    assert reconcile(s) == []
    assert {key: r.dump(key) for key in keys} == before


def test_a_worker_closes_when_idle_though_a_lost_write_left_counts_behind(
    redis_url, r, tmp_path, procs
):
    """A real worker on a Redis whose counts say there is work: it corrects
    them while it has nothing to do, and closes when idle."""
    now_ms = int(r.time()[0]) * 1000
    r.set(WK.requests_size, 3)  # counted, and in no queue
    r.zadd(WK.leases, {b"gone:1:abc/7": now_ms + 2000})  # its info lost
    r.hset(WK.in_flight, "x.example", 1)  # the slot it held
    r.hset(WK.cap_waiters, "x.example", "gone:1:abc")
    r.hset(job_counts(WK), mapping={"default|queued": 3, "default|leased": 1})
    assert not work(r, WK).idle
    w = worker(
        "w1", redis_url, tmp_path, "MAX_IDLE_TIME_BEFORE_CLOSE=1", "FRONTIER_LEASE_TIMEOUT=3"
    )
    procs.append(w)
    assert w.wait(60) == 0, w.log()[-3000:]
    assert work(r, WK).idle
    assert r.get(WK.requests_size) == b"0" and r.zcard(WK.leases) == 0
    assert not r.exists(WK.in_flight, WK.cap_waiters, WK.hosts)
    assert r.hgetall(job_counts(WK)) == {b"default|queued": b"0", b"default|leased": b"0"}
    assert any(b"gone:1:abc/7" in e for e in r.lrange(WK.requests_rejected, 0, -1))
    assert int(published_stats(r, w, WK)["frontier/counts_reconciled"]) >= 4
    assert "Traceback" not in w.log()
