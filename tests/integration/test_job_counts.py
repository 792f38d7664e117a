"""Per-job counts kept by the frontier's scripts (issue 27, item 5), against a real
redis-server: exact through enqueue, lease, ack, a resent ack, retries with backoff,
and expired leases put back; bounded (a few fields per job, no per-URL key).
"""

import pytest
from scrapy import Request

from spiders_project.frontier.calls import (
    ack_call,
    enqueue_call,
    expired_call,
    requeue_call,
)
from spiders_project.frontier.codec.serialize import dumps
from spiders_project.frontier.outcomes import Outcome, ack_code
from spiders_project.keys.jobs import job_counts
from spiders_project.politeness.steered import KEEP_LIMITS, steer_call, steer_script
from spiders_project.read_model.job_progress import COUNT_FIELDS, RATE
from tests.integration.test_frontier_scripts import K, Scripts, lease, tok


@pytest.fixture
def s(r):
    return Scripts(r)


def request(url: str, job: str | None = None, **meta) -> bytes:
    """A queue member as the scheduler writes it (serialize.dumps)."""
    if job is not None:
        meta["crawl_job"] = job
    return dumps(Request(url, meta=meta).to_dict())


def counts(r) -> dict[str, dict[str, int]]:
    """The counts that are not 0 (a count that went back to 0 may stay as a field),
    each one a field the readers know (job_progress.COUNT_FIELDS)."""
    out: dict[str, dict[str, int]] = {}
    for raw, value in r.hgetall(job_counts(K)).items():
        job, _, what = raw.decode().rpartition("|")
        assert what in COUNT_FIELDS or what == RATE, raw
        if what != RATE:
            out.setdefault(job, {})
            if int(value):
                out[job][what] = int(value)
    return out


def enqueue(s, entries, **kw):
    keys, args = enqueue_call(K, entries, now=s.now, **kw)
    return s.enqueue(keys, args)[0]


def test_the_job_is_found_in_the_member_whatever_comes_before_it():
    # A nested dict or a cookie with a "crawl_job" key, and the key inside a
    # string (escaped): the job still comes first in the member.
    member = dumps(
        Request(
            'http://a.test/?"crawl_job":"url"',
            cookies={"crawl_job": "cookie"},
            meta={"x": {"crawl_job": "nested"}, "crawl_job": "j.1-a_b", "depth": 2},
        ).to_dict()
    )
    assert member.index(b'"crawl_job":"j.1-a_b"') < member.index(b"nested")


def test_each_request_counts_for_its_own_job_in_one_call(r, s):
    """Jobs alternating within one call (job_of remembers the last job read), and
    a "crawl_job" that is not the request's job: in the URL, a cookie or a
    nested dict of a request without one, or a value that is no job id."""
    odd = {"x": {"crawl_job": "nested"}}
    entries = [
        ("a", tok(f"a{i}"), 0, request(f"http://a/{i}", ["j1", "j2", "j10"][i % 3]))
        for i in range(9)
    ]
    entries += [
        ("a", tok("u"), 0, dumps(Request('http://a/?"crawl_job":"url"').to_dict())),
        ("a", tok("c"), 0, dumps(Request("http://a/c", cookies={"crawl_job": "k"}).to_dict())),
        ("a", tok("n"), 0, request("http://a/n", **odd)),
        ("a", tok("nj"), 0, request("http://a/nj", "j1", **odd)),
        ("a", tok("bad"), 0, request("http://a/bad", 'a"b')),
        ("a", tok("j"), 0, request("http://a/j", "j2")),
    ]
    assert enqueue(s, entries) == 15
    assert counts(r) == {
        "j1": {"queued": 4},
        "j2": {"queued": 4},
        "j10": {"queued": 3},
        "default": {"queued": 4},
    }


def test_counts_follow_a_request_from_enqueue_to_ack(r, s):
    entries = [("a", tok(f"a{i}"), 0, request(f"http://a/{i}", "j1")) for i in range(3)]
    entries += [("b", tok("b0"), 5, request("http://b/0", "j2"))]  # sorted set (priority)
    entries += [("b", tok("b1"), 0, request("http://b/1"))]  # no job: "default"
    entries += [("b", tok("b1"), 0, request("http://b/1"))]  # seen: not added, not counted
    assert enqueue(s, entries) == 5
    assert counts(r) == {"j1": {"queued": 3}, "j2": {"queued": 1}, "default": {"queued": 1}}
    lease(s, 0, [])
    got, *_ = lease(s, 10, [("a", 0), ("b", 0)])
    assert len(got) == 5
    ids = s.last_ids
    # Each lease holds one of its host's download slots: in flight.
    assert counts(r) == {
        "j1": {"leased": 3, "slots": 3},
        "j2": {"leased": 1, "slots": 1},
        "default": {"leased": 1, "slots": 1},
    }
    # Two of j1's pages fetched; the third lease ends without a page (a
    # retry queued anew, a dead letter, a request refused after its lease).
    # With the items scraped from each page.
    pages = [(ids[0], 3), (ids[1], 0)]
    assert s.ack(*ack_call(K, [ids[2]], pages=pages, now=s.now)) == 3
    # The same ack resent (a lost reply, a retried transaction): nothing twice.
    assert s.ack(*ack_call(K, [ids[2]], pages=pages, now=s.now)) == 0
    assert s.ack(*ack_call(K, [], pages=[(ids[3], 1), (ids[4], 2)], now=s.now)) == 2
    assert s.ack(*ack_call(K, [], pages=[(i, 5) for i in ids], now=s.now)) == 0
    assert counts(r) == {
        "j1": {"acked": 3, "pages": 2, "items": 3},
        "j2": {"acked": 1, "pages": 1, "items": 1},
        "default": {"acked": 1, "pages": 1, "items": 2},
    }
    # Bounded: one hash, a few fields per job, whatever the number of URLs.
    assert r.hlen(job_counts(K)) == 21
    # The marks of each job's rate: its pages at t0 and t1, and its last page.
    assert r.hget(job_counts(K), "j1|rate") == f"{s.now} 0 {s.now} 0 {s.now}".encode()


def test_a_dead_letter_a_refusal_or_a_drop_counts_for_its_job_and_is_no_page(r, s):
    enqueue(s, [("a", tok(f"a{i}"), 0, request(f"http://a/{i}", "j1")) for i in range(4)])
    lease(s, 10, [("a", 0)])
    ids = s.last_ids
    outcomes = [Outcome.DEAD_LETTER, Outcome.PAGE, Outcome.REFUSED, Outcome.DROPPED]
    ended = [(i, ack_code(o, items=2)) for i, o in zip(ids, outcomes, strict=True)]
    assert s.ack(*ack_call(K, [], pages=ended, now=s.now)) == 4
    assert s.ack(*ack_call(K, [], pages=ended, now=s.now)) == 0
    assert counts(r) == {
        "j1": {"acked": 4, "pages": 1, "items": 2, "dead_letters": 1, "refused": 1, "purged": 1}
    }


def test_a_retry_counts_as_later_until_it_is_due(r, s):
    retry = request("http://a/r", "j1")
    assert enqueue(s, [("a", "", 0, retry, b"", 5000)]) == 1
    assert counts(r) == {"j1": {"later": 1}}
    assert lease(s, 10, [("a", 0)])[0] == []
    s.tick(5000)
    assert lease(s, 10, [("a", 0)])[0] == [retry]
    assert counts(r) == {"j1": {"leased": 1, "slots": 1}}


def test_expired_leases_go_back_to_queued(r, s):
    entries = [("a", tok(f"a{i}"), 0, request(f"http://a/{i}", "j1")) for i in range(2)]
    entries += [("a", "", 3, request("http://a/s", "j1"))]  # sorted set
    enqueue(s, entries)
    lease(s, 0, [])
    assert len(lease(s, 10, [("a", 0)], ms=1000)[0]) == 3
    first = s.last_ids
    s.tick(1001)
    found, _ = s.expired(*expired_call(K, 100, now=s.now))
    pairs = [(found[i], found[i + 1].decode()) for i in range(0, len(found), 2)]
    assert s.requeue(*requeue_call(K, pairs, expired=True, now=s.now)) == 3
    assert s.requeue(*requeue_call(K, pairs, expired=True, now=s.now)) == 0
    assert counts(r) == {"j1": {"queued": 3}}
    # The old holder's late ack finds nothing; the new leases end once.
    assert s.ack(*ack_call(K, first, now=s.now)) == 0
    assert len(lease(s, 10, [("a", 0)])[0]) == 3
    # A worker handing its own leases back.
    mine = [(i, "a") for i in s.last_ids[:1]]
    assert s.requeue(*requeue_call(K, mine, expired=False, now=s.now)) == 1
    assert s.ack(*ack_call(K, s.last_ids[1:], now=s.now)) == 2
    assert counts(r) == {"j1": {"queued": 1, "acked": 2}}


def test_a_lease_without_readable_host_leaves_leased(r, s):
    enqueue(s, [("a", "", 0, request("http://a/0", "j1"))])
    lease(s, 10, [("a", 0)], ms=1000)
    (lease_id,) = s.last_ids
    garbled = "garbled " + request("http://a/0", "j1").decode()
    r.hset(K.lease_info, lease_id, garbled)
    s.tick(1001)
    found, rejected = s.expired(*expired_call(K, 100, now=s.now))
    assert found == [] and rejected == [lease_id]
    assert counts(r) == {"j1": {}}


def test_a_host_purge_moves_its_requests_to_purged(r, s):
    entries = [("a", tok(f"a{i}"), 0, request(f"http://a/{i}", "j1")) for i in range(3)]
    entries += [("a", "", 2, request("http://a/s", "j2"))]
    entries += [("a", "", 0, request("http://a/r", "j2"), b"", 5000)]  # a retry waiting
    entries += [("b", tok("b0"), 0, request("http://b/0", "j2"))]  # another host: kept
    assert enqueue(s, entries) == 6
    keys, args = steer_call(K, "a", KEEP_LIMITS, purge=True)
    assert s.calls.script(steer_script(), keys, args) == [4, 1]
    assert counts(r) == {"j1": {"purged": 3}, "j2": {"queued": 1, "purged": 2}}
