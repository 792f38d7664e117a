"""Pause, resume and cancel in the frontier's scripts (issue 27, items 2 to 4), against a
real redis-server: a paused job's requests are set aside as they come up and come back
on resume, in place; a cancelled job's are purged, its new links dropped, counted; no
other job's request is touched, and every count stays exact.
"""

import json

import pytest

from spiders_project.frontier.calls import enqueue_call, lease_call
from spiders_project.jobs.control import (
    change_state,
    clear_control,
    purge_job,
    restore_held,
    wait_for_end,
)
from spiders_project.jobs.states import JobStateError
from spiders_project.jobs.submit import JobSpec, submit_call, submit_script
from spiders_project.keys import RedisKeys
from spiders_project.keys.jobs import job_control, job_held, spider_job_control
from spiders_project.read_model.job_progress import read_jobs
from tests.integration.test_frontier_scripts import K, Scripts, lease, tok
from tests.integration.test_job_counts import counts, enqueue, request
from tests.support.processes import scrapy_command
from tests.support.services import RedisClusterGroup
from tests.support.shards import one_host_per_shard


@pytest.fixture
def s(r):
    return Scripts(r)


def submit(s, job: str) -> None:
    spec = JobSpec(job, (f"http://{job}.test/",)).check()
    keys, args = submit_call(K, spec, "run1", events_max=100)
    s.calls.script(submit_script(), keys, args)


def queue_two_jobs(s) -> None:
    """Host "shared" with 3 requests of A and 3 of B interleaved, "a" with 2 of A, "b"
    with 2 of B; some in the sorted set (priority 5), most in the list."""
    entries = []
    for i in range(3):
        entries.append(("shared", tok(f"sa{i}"), 0, request(f"http://shared/a{i}", "A")))
        entries.append(
            ("shared", tok(f"sb{i}"), 5 if i == 0 else 0, request(f"http://shared/b{i}", "B"))
        )
    entries += [("a", tok(f"a{i}"), 0, request(f"http://a/{i}", "A")) for i in range(2)]
    entries += [("b", tok(f"b{i}"), 0, request(f"http://b/{i}", "B")) for i in range(2)]
    assert enqueue(s, entries) == 10


def urls(members) -> list[str]:
    return [json.loads(m)["u"] for m in members]


def test_a_paused_job_is_set_aside_as_it_comes_up_and_the_other_job_goes_on(r, s):
    submit(s, "A")
    submit(s, "B")
    queue_two_jobs(s)
    change_state(s.calls, K, "A", "paused", why="pause", events_max=100)
    assert r.hget(spider_job_control(K), "A") == b"paused"
    lease(s, 0, [])
    got, *_ = lease(s, 100, [("shared", 0), ("a", 0), ("b", 0)])
    # Only B's requests are leased; A's went to the held set, still queued for A.
    assert sorted(urls(got)) == ["http://b/0", "http://b/1"] + [
        f"http://shared/b{i}" for i in range(3)
    ]
    assert r.zcard(job_held(K)) == 5
    assert counts(r) == {"A": {"queued": 5}, "B": {"leased": 5, "slots": 5}}
    assert int(r.get(K.requests_size)) == 0
    # Nothing of A comes up while it is paused.
    assert lease(s, 100, [("shared", 0), ("a", 0)])[0] == []
    # Resume: A's requests go back, in their queues, and are leased.
    change_state(s.calls, K, "A", "running", why="resume", events_max=100)
    assert restore_held(s.calls, K, "A", now=s.now) == 5
    assert restore_held(s.calls, K, "A", now=s.now) == 0  # a second resume finds nothing
    assert r.zcard(job_held(K)) == 0
    assert int(r.get(K.requests_size)) == 5
    got, *_ = lease(s, 100, [("shared", 0), ("a", 0)])
    assert sorted(urls(got)) == ["http://a/0", "http://a/1"] + [
        f"http://shared/a{i}" for i in range(3)
    ]
    assert counts(r) == {"A": {"leased": 5, "slots": 5}, "B": {"leased": 5, "slots": 5}}


def test_a_paused_jobs_requests_leave_a_delayed_hosts_turn_to_the_other_job(r, s):
    # A host with a delay gives one request a turn: a paused job's request
    # must not take B's turn.
    entries = [("h", tok(f"a{i}"), 0, request(f"http://h/a{i}", "A")) for i in range(5)]
    entries += [("h", tok("b0"), 0, request("http://h/b0", "B"))]
    enqueue(s, entries)
    submit(s, "A")
    change_state(s.calls, K, "A", "paused", why="pause", events_max=100)
    lease(s, 0, [])
    got, *_ = lease(s, 10, [("h", 1000)])
    assert urls(got) == ["http://h/b0"]
    assert r.zcard(job_held(K)) == 5


def test_cancel_purges_the_job_everywhere_and_drops_its_new_links(r, s):
    submit(s, "A")
    submit(s, "B")
    queue_two_jobs(s)
    # A retry of B backing off, and one of A's requests held by a pause first.
    enqueue(s, [("b", "", 0, request("http://b/retry", "B"), b"", 5000)])
    change_state(s.calls, K, "B", "paused", why="pause", events_max=100)
    lease(s, 0, [])
    got, *_ = lease(s, 1, [("b", 0)])  # B's first list member goes to the held set
    assert got == []
    assert r.zcard(job_held(K)) == 2
    change_state(s.calls, K, "B", "cancelled", why="cancel", events_max=100)
    purged = purge_job(s.calls, K, "B")
    assert purged == {"queued": 3, "backing_off": 1, "held": 2}
    # Nothing of A was touched, in place.
    got, *_ = lease(s, 100, [("shared", 0), ("a", 0), ("b", 0)])
    assert sorted(urls(got)) == ["http://a/0", "http://a/1"] + [
        f"http://shared/a{i}" for i in range(3)
    ]
    # A link of B found later (a page in flight) is dropped and counted; one
    # found twice counts once; A's links are queued.
    entries = [("b", tok("new"), 0, request("http://b/new", "B"))] * 2
    entries += [("a", tok("a-new"), 0, request("http://a/new", "A"))]
    assert enqueue(s, entries) == 1
    assert counts(r) == {"A": {"leased": 5, "slots": 5, "queued": 1}, "B": {"purged": 7}}
    assert int(r.get(K.requests_size)) == 1
    progress = {p.id: p for p in read_jobs(s.calls, K)}
    assert progress["B"].state == "cancelled"
    assert progress["B"].purged == 7
    assert progress["B"].queued == progress["B"].backing_off == 0
    # The stream: one event per change, with the counts at the change.
    events = [dict(e) for _, e in r.xrange(K.jobs_events)]
    assert [(e[b"job"], e[b"state"]) for e in events][-2:] == [
        (b"B", b"paused"),
        (b"B", b"cancelled"),
    ]
    assert wait_for_end(s.calls, K, "B", 1) == "cancelled"


def test_state_changes_the_operator_may_not_make(r, s):
    submit(s, "A")
    with pytest.raises(JobStateError, match="cannot resume"):
        change_state(s.calls, K, "A", "running", why="resume", events_max=100)
    with pytest.raises(JobStateError, match="has no record"):
        change_state(s.calls, K, "nope", "paused", why="pause", events_max=100)
    change_state(s.calls, K, "A", "cancelled", why="cancel", events_max=100)
    with pytest.raises(JobStateError, match="cannot pause"):
        change_state(s.calls, K, "A", "paused", why="pause", events_max=100)
    # Submitted again, it runs again (the command clears the control first).
    assert wait_for_end(s.calls, K, "A", 0) == "cancelled"


def test_a_link_refused_before_its_queue_counts_once_per_url_and_job(r, s):
    # "~<token>": record the (job-salted) fingerprint, count refused if new, never queue.
    refused = [("a", "~" + tok("x-A"), 0, request("http://a/x", "A"))] * 3
    refused += [("a", "~" + tok("x-B"), 0, request("http://a/x", "B"))]
    assert enqueue(s, refused) == 0
    assert counts(r) == {"A": {"refused": 1}, "B": {"refused": 1}}
    assert int(r.get(K.requests_size) or 0) == 0
    # The URL itself is still free to be queued (the refusal's token is salted).
    assert enqueue(s, [("a", tok("x"), 0, request("http://a/x", "C"))]) == 1


def test_a_paused_job_submitted_again_runs_with_what_its_pause_set_aside(r, s):
    submit(s, "A")
    queue_two_jobs(s)
    change_state(s.calls, K, "A", "paused", why="pause", events_max=100)
    lease(s, 0, [])
    lease(s, 100, [("shared", 0), ("a", 0)])
    assert r.zcard(job_held(K)) == 5
    # What `scrapy jobs submit` does first: the job is no longer paused anywhere,
    # and its requests set aside are queued again.
    assert clear_control(s.calls, K, "A") == 5
    assert r.hget(spider_job_control(K), "A") is None
    submit(s, "A")
    assert wait_for_end(s.calls, K, "A", 0) is None  # running again: no end yet
    assert counts(r)["A"] == {"queued": 5}


def test_on_a_sharded_redis_cluster_pause_and_cancel_reach_every_shard():
    """Three masters, one frontier shard each: the commands copy the job's control to
    every shard, whose lease script sets its requests aside; cancel purges them all."""
    group = RedisClusterGroup(masters=3)
    try:
        ck = RedisKeys("distributed", cluster=True, shards=3)
        client = group.client
        client.set(ck.frontier_shards, 3)
        hosts = one_host_per_shard(ck, 3)
        s = Scripts(client)
        for h in hosts:
            entries = [(h, tok(f"{h}A{i}"), 0, request(f"http://{h}/a{i}", "A")) for i in range(2)]
            entries += [(h, tok(f"{h}B"), 0, request(f"http://{h}/b", "B"))]
            keys, args = enqueue_call(ck.for_host(h), entries, now=s.now)
            assert s.enqueue(keys, args)[0] == 3
        env = {"REDIS_CLUSTER": "true"}

        def jobs(*argv: str) -> dict:
            done = scrapy_command(group.url, "jobs", *argv, "--json", env=env)
            assert done.returncode == 0, done.stderr
            return json.loads(done.stdout.splitlines()[-1])

        for job in ("A", "B"):
            jobs("submit", job, f"http://{job.lower()}.example/")
        assert jobs("pause", "A")["state"] == "paused"
        leased = []
        for h in hosts:
            shard = ck.for_host(h)
            assert client.hget(job_control(shard), "A") == b"paused"
            keys, args = lease_call(shard, 8, 60_000, [(h, 0)], 8, 8, "w1", 0, now=s.now)
            leased += [json.loads(m)["u"] for m in s.lease(keys, args)[0][1::3]]
        assert sorted(leased) == sorted(f"http://{h}/b" for h in hosts)
        cancelled = jobs("cancel", "A")
        assert (cancelled["purged"], cancelled["held"]) == (6, 6)
        shown = jobs("show", "A")
        assert shown["state"] == "cancelled" and shown["purged"] == 6 and shown["queued"] == 0
        shown = jobs("show", "B")
        assert shown["state"] == "running" and shown["in_flight"] == 3
    finally:
        group.stop()


def test_jobs_wait_exit_statuses(redis_url, r):
    from tests.support.processes import K as DK

    s = Scripts(r)
    spec = JobSpec("slow", ("http://slow.test/",)).check()
    keys, args = submit_call(DK, spec, "run1", events_max=100)
    s.calls.script(submit_script(), keys, args)
    timed_out = scrapy_command(redis_url, "jobs", "wait", "slow", "--timeout", "1", "--json")
    assert timed_out.returncode == 4, timed_out.stderr
    assert json.loads(timed_out.stdout) == {"id": "slow", "state": None, "timed_out": True}
    change_state(s.calls, DK, "slow", "cancelled", why="cancel", events_max=100)
    cancelled = scrapy_command(redis_url, "jobs", "wait", "slow")
    assert cancelled.returncode == 3 and "Job slow cancelled" in cancelled.stdout
    missing = scrapy_command(redis_url, "jobs", "wait", "nope")
    assert missing.returncode == 1 and "no job nope" in missing.stderr
    refused = scrapy_command(redis_url, "jobs", "pause", "slow")
    assert refused.returncode == 1 and "cannot pause" in refused.stderr
