"""The finish rule as a process that is no worker runs it (``jobs/finish.FinishLooks``),
against a real redis-server: lookers take turns, and two looks at once change a
job once."""

from __future__ import annotations

import json

from spiders_project.jobs.finish import FinishLooks, Reads, Run, finish_look, run_sync
from spiders_project.jobs.states import state_script
from spiders_project.keys import RedisKeys
from spiders_project.keys.jobs import job_counts, job_look, job_quiet
from tests.integration.test_frontier_scripts import Scripts

K = RedisKeys("t")


def finisher(r, look_s: float = 1.0) -> FinishLooks:
    return FinishLooks(Scripts(r).calls, ["t"], RedisKeys, look_s=look_s, grace_s=0, events_max=100)


def states(r, job: str) -> list[bytes]:
    return [f[b"state"] for _, f in r.xrange(K.jobs_events) if f[b"job"] == job.encode()]


def test_a_quiet_job_is_finished_by_the_second_look_and_lookers_take_turns(r):
    r.hset(K.jobs, "J", json.dumps({"id": "J", "state": "running", "started_at": 1}))
    r.hset(job_counts(K), mapping={"J|acked": 5, "J|pages": 5, "J|queued": 0})
    one, two = finisher(r), finisher(r)
    first = one.look("t")
    assert first is not None and first.changes == []
    assert r.hget(job_quiet(K), "J") is not None  # quiet since this look
    assert two.look("t") is None  # the period's turn was taken
    r.delete(job_look(K))  # the period is over
    second = two.look("t")
    assert second is not None and [c.progress.id for c in second.changes] == ["J"]
    assert json.loads(r.hget(K.jobs, "J"))["state"] == "finished"
    assert states(r, "J") == [b"finished"]


def test_two_looks_that_overlap_change_a_job_once(r):
    """Both found the job quiet a grace ago; the compare-and-set lets one through."""
    r.hset(K.jobs, "J", json.dumps({"id": "J", "state": "running", "started_at": 1}))
    r.hset(job_counts(K), mapping={"J|acked": 3})
    r.hset(job_quiet(K), "J", "1 3")
    calls = Scripts(r).calls
    looks = [finish_look(K, grace_ms=0, events_max=100) for _ in range(2)]
    # Both read before either writes: step each to its script call.
    pending = []
    for look in looks:
        reply = None
        while True:
            step = look.send(reply)
            if isinstance(step, Run):
                pending.append(step)
                break
            if isinstance(step, Reads):
                reply = [calls.command(*c, writes=False) for c in step.commands]
            else:
                reply = calls.command(*step.command)
    replies = [int(calls.script(state_script(), s.keys, s.args)) for s in pending]
    assert sorted(replies) == [0, 1]
    assert states(r, "J") == [b"finished"]


def test_a_job_seeded_raw_and_already_done_gets_its_record_when_finished(r):
    r.hset(job_counts(K), mapping={"R|acked": 2, "R|pages": 2})
    calls = Scripts(r).calls
    for _ in range(2):
        run_sync(finish_look(K, grace_ms=0, events_max=100), calls, state_script())
    record = json.loads(r.hget(K.jobs, "R"))
    assert (record["state"], record["via"]) == ("finished", "seeded")
