"""Jobs on one host take turns, in the frontier's scripts, against a real redis-server.

A request of a job other than the default one is queued in its host's jobs
set (``frontier/lua/job_queues.lua``), and the lease script gives one request
a job in turn (``job_turns.lua``): whichever job queued first, priorities
still ordering each job's own. A job's downloads are its leases that hold a
slot (``<job>|slots``): spares hold none until a slot passes to them.
"""

import json

import pytest

from spiders_project.frontier.calls import ack_call, enqueue_call, expired_call, requeue_call
from spiders_project.jobs.control import change_state, purge_job, restore_held
from spiders_project.keys.jobs import host_jobs, job_held, job_turns
from spiders_project.read_model.job_progress import add_top_hosts, read_jobs
from tests.integration.test_frontier_scripts import K, Scripts, lease, tok
from tests.integration.test_job_control import submit
from tests.integration.test_job_counts import counts, enqueue, request


@pytest.fixture
def s(r):
    return Scripts(r)


def links(job: str | None, n: int, host: str = "h", start: int = 0) -> list[tuple]:
    name = job or "default"
    return [
        (host, tok(f"{name}{i}"), 0, request(f"http://{host}/{name}/{i}", job))
        for i in range(start, start + n)
    ]


def job_in(member: bytes) -> str:
    return json.loads(member).get("m", {}).get("crawl_job", "default")


def one_at_a_time(s, n: int, host: str = "h") -> list[str]:
    """The jobs of ``n`` leases of a host with a delay (one request a turn)."""
    out = []
    for _ in range(n):
        got, *_ = lease(s, 1, [(host, 1000)])
        out += [job_in(m) for m in got]
        s.tick(1000)
    return out


@pytest.mark.parametrize("first", ["A", "B"])
def test_two_jobs_on_a_delayed_host_alternate_whichever_queued_first(r, s, first):
    second = "B" if first == "A" else "A"
    enqueue(s, links(first, 50))
    lease(s, 0, [])
    assert one_at_a_time(s, 3) == [first] * 3  # alone on the host, it has every turn
    enqueue(s, links(second, 5))
    turns = one_at_a_time(s, 12)
    assert turns[:10].count(second) == 5 and turns[:10].count(first) == 5
    assert all(turns[i] != turns[i + 1] for i in range(9)), turns
    assert turns[10:] == [first, first]  # the second one's requests are all leased
    # Requests of jobs are in the host's jobs set, none in its sorted set or list.
    assert r.zcard(K.host_queue("h")) == r.llen(K.host_list("h")) == 0
    assert r.zcard(host_jobs(K, "h")) == 50 - 3 - 7


def test_a_host_without_delay_gives_its_take_in_turns_and_the_default_job_has_one(r, s):
    enqueue(s, links("A", 20) + links(None, 20) + links("B", 20))
    lease(s, 0, [])
    got, *_ = lease(s, 9, [("h", 0)])
    assert sorted(job_in(m) for m in got) == ["A"] * 3 + ["B"] * 3 + ["default"] * 3
    # The next call goes on from where this one stopped.
    got, *_ = lease(s, 3, [("h", 0)])
    assert sorted(job_in(m) for m in got) == ["A", "B", "default"]


def test_priorities_order_each_jobs_own_requests(r, s):
    enqueue(s, links("A", 3) + links("B", 3))
    enqueue(s, [("h", tok("A-hi"), 7, request("http://h/A/hi", "A"))])
    enqueue(s, [("h", tok("A-lo"), -2, request("http://h/A/lo", "A"))])
    lease(s, 0, [])
    got, *_ = lease(s, 8, [("h", 0)])
    mine = [json.loads(m)["u"] for m in got if job_in(m) == "A"]
    assert mine == ["http://h/A/hi", *(f"http://h/A/{i}" for i in range(3)), "http://h/A/lo"]
    assert [job_in(m) for m in got[:4]].count("A") == 2  # still every other request


def test_a_crawl_without_jobs_never_writes_a_jobs_set_or_a_turn(r, s):
    enqueue(s, links(None, 10))
    enqueue(s, [("h", tok("p"), 3, request("http://h/p"))])
    lease(s, 0, [])
    assert len(lease(s, 20, [("h", 0)])[0]) == 11
    assert not r.exists(host_jobs(K, "h")) and not r.exists(job_turns(K))


def test_a_host_whose_jobs_set_empties_leaves_the_turns(r, s):
    enqueue(s, links("A", 2) + links(None, 2))
    lease(s, 0, [])
    assert r.hexists(job_turns(K), "h")
    assert len(lease(s, 10, [("h", 0)])[0]) == 4
    assert not r.hexists(job_turns(K), "h") and not r.exists(host_jobs(K, "h"))
    assert r.zscore(K.hosts, "h") is None  # nothing left: out of the ready-set


def test_a_lease_put_back_and_a_retry_return_to_the_jobs_set_in_place(r, s):
    enqueue(s, links("A", 3))
    lease(s, 0, [])
    got, *_ = lease(s, 1, [("h", 0)], ms=1000)
    assert json.loads(got[0])["u"] == "http://h/A/0"
    s.tick(1001)
    found, _ = s.expired(*expired_call(K, 100, now=s.now))
    pairs = [(found[i], found[i + 1].decode()) for i in range(0, len(found), 2)]
    assert s.requeue(*requeue_call(K, pairs, expired=True, now=s.now)) == 1
    assert r.zcard(host_jobs(K, "h")) == 3
    # A retry of A backing off comes back to the jobs set once due.
    keys, args = enqueue_call(K, [("h", "", 0, request("http://h/A/r", "A"), b"", 500)], now=s.now)
    s.enqueue(keys, args)
    s.tick(500)
    got, *_ = lease(s, 10, [("h", 0)])
    assert [json.loads(m)["u"] for m in got] == [
        *(f"http://h/A/{i}" for i in range(3)),
        "http://h/A/r",
    ]
    assert counts(r) == {"A": {"leased": 4, "slots": 4}}


def test_pause_resume_and_cancel_of_a_job_in_a_jobs_set(r, s):
    submit(s, "A")
    submit(s, "B")
    enqueue(s, links("A", 4) + links("B", 4))
    change_state(s.calls, K, "A", "paused", why="pause", events_max=100)
    lease(s, 0, [])
    got, *_ = lease(s, 10, [("h", 0)])
    assert [job_in(m) for m in got] == ["B"] * 4
    assert r.zcard(job_held(K)) == 4 and counts(r)["A"] == {"queued": 4}
    change_state(s.calls, K, "A", "running", why="resume", events_max=100)
    assert restore_held(s.calls, K, "A", now=s.now) == 4
    assert r.zcard(host_jobs(K, "h")) == 4 and r.hget(job_turns(K), "h") is not None
    enqueue(s, links("B", 2, start=4))
    change_state(s.calls, K, "A", "cancelled", why="cancel", events_max=100)
    assert purge_job(s.calls, K, "A") == {"queued": 4, "backing_off": 0, "held": 0}
    assert [m.split(b" ", 1)[0] for m in r.zrange(host_jobs(K, "h"), 0, -1)] == [b"B", b"B"]
    assert counts(r)["A"] == {"purged": 4}
    (a,) = [p for p in read_jobs(s.calls, K) if p.id == "A"]
    assert a.queued == 0 and a.purged == 4


def test_in_flight_counts_the_leases_that_hold_a_slot_and_leased_the_rest(r, s):
    """A host capped at 2: two leases with slots, three spares without; the slot
    of an ended download passes to a spare of the other job."""
    enqueue(s, links("A", 3) + links("B", 3))
    lease(s, 0, [])
    got, *_ = lease(s, 2, [("h", 0, 3, False)], per_host=2)
    assert len(got) == 5 and len(s.spares) == 3
    ids = s.last_ids
    by_id = {i: job_in(m) for i, m in zip(ids, got, strict=True)}
    slotted = [i for i in ids if i not in s.spares]
    jobs = {p.id: p for p in read_jobs(s.calls, K)}
    assert sum(p.in_flight for p in jobs.values()) == 2 == int(r.hget(K.in_flight, "h"))
    assert sum(p.leased for p in jobs.values()) == 3
    # The download of a slotted lease ends: its slot passes to a spare of the other job.
    ended = slotted[0]
    spare = next(i for i in s.spares if by_id[i] != by_id[ended])
    before = {p.id: p.in_flight for p in jobs.values()}
    assert s.ack(*ack_call(K, [], transfers=[(ended, spare)], now=s.now)) == 0
    jobs = {p.id: p for p in read_jobs(s.calls, K)}
    assert sum(p.in_flight for p in jobs.values()) == 2 == int(r.hget(K.in_flight, "h"))
    assert jobs[by_id[ended]].in_flight == before[by_id[ended]] - 1
    assert jobs[by_id[spare]].in_flight == before[by_id[spare]] + 1
    # A slot given back (a download ended, no spare) leaves its job's downloads.
    assert s.ack(*ack_call(K, [], releases=[spare], now=s.now)) == 0
    assert sum(p.in_flight for p in read_jobs(s.calls, K)) == 1 == int(r.hget(K.in_flight, "h"))
    # Every lease ended: nothing in flight, nothing leased.
    assert s.ack(*ack_call(K, ids, now=s.now)) == 5
    jobs = {p.id: p for p in read_jobs(s.calls, K)}
    assert all(p.in_flight == p.leased == 0 for p in jobs.values())
    left = counts(r)
    assert sum(c.get("acked", 0) for c in left.values()) == 5
    assert sum(c.get("queued", 0) for c in left.values()) == 1  # one not leased yet
    assert not any("slots" in c or "leased" in c for c in left.values())


def test_show_counts_a_jobs_requests_in_its_hosts_jobs_sets(r, s):
    enqueue(s, links("A", 5) + links("B", 2) + links("A", 3, "g", start=5) + links(None, 4))
    jobs = read_jobs(s.calls, K)
    add_top_hosts(s.calls, K, jobs, "A", 10)
    assert [p for p in jobs if p.id == "A"][0].top_hosts == [("h", 5), ("g", 3)]
    add_top_hosts(s.calls, K, jobs, "default", 10)
    assert [p for p in jobs if p.id == "default"][0].top_hosts == [("h", 4)]
