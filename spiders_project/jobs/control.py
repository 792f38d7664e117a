"""The operator's hand on a job: pause, resume, cancel, and wait for its end.

Blocking, through a ``SyncRedisCalls`` (``scrapy jobs``). Each change is one
``lua/job_state.lua`` call (a compare-and-set of the record, retried when a
worker changed it meanwhile), then, on a sharded frontier, the control
field's copy in every shard; then the queues:

- **pause**: nothing to move. The lease script sets the job's requests aside
  as they come up (``frontier/lua/lease.lua``), the workers hand back those
  they hold (``pause_step.JobStep``), and everything stays counted as queued.
- **resume**: the requests set aside go back to their hosts' queues
  (``lua/restore_held.lua``), a few hundred a call, in every shard and lane.
  Run again, it finishes what a resume cut short left.
- **cancel**: every host's queues are read and the job's requests dropped
  (``lua/purge_job.lua``), with those set aside while it was paused; links
  its pages in flight find later are dropped by the enqueue script.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from spiders_project.jobs.states import (
    ENDED,
    JobStateError,
    check_change,
    control_writes,
    purge_script,
    restore_call,
    restore_script,
    run_clears,
    shown_state,
    state_call,
    state_script,
)
from spiders_project.jobs.submit import (
    JobSpec,
    new_run_id,
    resubmit_recrawl_after,
    submit_call,
    submit_script,
)
from spiders_project.keys import RedisKeys
from spiders_project.keys.jobs import host_jobs, job_counts, job_held
from spiders_project.read_model.job_progress import JobProgress, job_totals, read_jobs
from spiders_project.redis_access import SyncRedisCalls

# Attempts at a state change whose record a worker changed meanwhile.
ATTEMPTS = 5
# Held requests put back per call, and hosts purged per call.
RESTORE_BATCH = 500
PURGE_HOSTS = 50


def _now_ms(calls: SyncRedisCalls) -> int:
    seconds, micros = calls.command("TIME", writes=False)
    return int(seconds) * 1000 + int(micros) // 1000


def change_state(
    calls: SyncRedisCalls,
    keys: RedisKeys,
    job: str,
    to: str,
    *,
    why: str,
    events_max: int,
    by: str | None = None,
) -> JobProgress:
    """Take ``job`` to state ``to`` as the operator asked; its progress at the change.

    ``by`` names who asked (the console's user): the event then carries it as
    ``"by"``. A job seeded raw that no look has given a record yet is running,
    as ``scrapy jobs list`` shows it (``states.shown_state``): the change writes
    its record. Raises JobStateError if its state does not allow it.
    """
    for _ in range(ATTEMPTS):
        read = calls.command("HGET", keys.jobs, job, writes=False)
        found = [p for p in read_jobs(calls, keys) if p.id == job]
        check_change(job, shown_state(read, bool(found)), to)
        progress = found[0] if found else JobProgress(job)
        script_keys, args = state_call(
            keys,
            job,
            read,
            to,
            why=why,
            now_ms=_now_ms(calls),
            progress=progress,
            events_max=events_max,
        )
        if by is not None:
            args += ["by", by]  # one more pair of the event's fields (job_state.lua)
        if int(calls.script(state_script(), script_keys, args, retry=False)) == 1:
            for command in control_writes(keys, job, to):
                calls.command(*command, retry=True)
            progress.state = to
            return progress
    raise JobStateError(f"job {job} kept changing; try again")


def submit_run(
    calls: SyncRedisCalls, keys: RedisKeys, spec: JobSpec, *, events_max: int, by: str = ""
) -> tuple[str, int]:
    """Start a run of ``spec`` (``scrapy jobs submit``, the console): its run id and
    its started_at (ms, Redis' clock). ``spec`` is checked (``JobSpec.check``); ``by``
    names who asked (the console's user), as the run's event says."""
    run = new_run_id()
    # A job submitted again runs, even if it was paused or cancelled:
    # first no shard keeps it so, then its record says running.
    clear_control(calls, keys, spec.job)
    # A job that ran before recrawls its pages (jobs/submit.py), where the seen-set keeps times.
    recrawl_after = resubmit_recrawl_after(
        calls.command("HGET", keys.jobs, spec.job, writes=False),
        calls.command("GET", keys.all_shards[0].seen_mode, writes=False),
        _now_ms(calls),
    )
    script_keys, args = submit_call(
        keys,
        spec,
        run,
        events_max=events_max,
        recrawl_after=recrawl_after,
        base=job_totals(calls, keys, spec.job),
        by=by,
    )
    return run, int(calls.script(submit_script(), script_keys, args, retry=False))


def clear_control(calls: SyncRedisCalls, keys: RedisKeys, job: str) -> int:
    """Before a job is submitted again: neither the spider nor a shard keeps it
    paused or cancelled, and what a pause set aside is queued again (how many)."""
    for command in run_clears(keys, job):
        calls.command(*command, retry=True)
    return restore_held(calls, keys, job)


def restore_held(calls: SyncRedisCalls, keys: RedisKeys, job: str, *, now: int | str = "") -> int:
    """Put every request of ``job`` set aside while it was paused back in its queue
    (ready at ``now``: Redis' clock, or a test's)."""
    script = restore_script()
    restored = 0
    low, high = f"[{job} ", f"({job}!"
    for shard in keys.all_shards:
        for lane in shard.all_lanes:
            held = job_held(lane)
            while True:
                members = calls.command(
                    "ZRANGEBYLEX", held, low, high, "LIMIT", 0, RESTORE_BATCH, writes=False
                )
                if not members:
                    break
                script_keys, args = restore_call(lane, members, now=now)
                restored += int(calls.script(script, script_keys, args, retry=False))
    return restored


def _queue_hosts(calls: SyncRedisCalls, lane: RedisKeys) -> list[str]:
    """Every host of a shard's lane that may have queued requests: those in the
    ready-set, those out of it at their cap, and those with downloads in flight."""
    found = calls.command("ZRANGE", lane.hosts, 0, -1, writes=False)
    found += calls.command("HKEYS", lane.cap_waiters, writes=False)
    found += calls.command("HKEYS", lane.in_flight, writes=False)
    return sorted({h.decode("utf-8", "surrogateescape") for h in found})


def purge_job(calls: SyncRedisCalls, keys: RedisKeys, job: str) -> dict[str, int]:
    """Drop every queued, backing-off and set-aside request of ``job``; how many of each."""
    script = purge_script()
    total = {"queued": 0, "backing_off": 0, "held": 0}
    for shard in keys.all_shards:
        for lane in shard.all_lanes:
            hosts = _queue_hosts(calls, lane)
            first = True
            for at in range(0, max(len(hosts), 1), PURGE_HOSTS):
                batch = hosts[at : at + PURGE_HOSTS]
                script_keys = [lane.requests_size, job_counts(shard), job_held(lane)]
                script_keys += [lane.host_queue(h) for h in batch]
                script_keys += [lane.host_later(h) for h in batch]
                script_keys += [lane.host_list(h) for h in batch]
                script_keys += [host_jobs(lane, h) for h in batch]
                args = [job, "1" if first else "0"]
                queued, later, held = calls.script(script, script_keys, args, retry=False)
                first = False
                total["queued"] += int(queued)
                total["backing_off"] += int(later)
                total["held"] += int(held)
    return total


def wait_for_end(
    calls: SyncRedisCalls,
    keys: RedisKeys,
    job: str,
    timeout: float | None,
    *,
    poll: float = 0.5,
    seen: Callable[[str], Any] = lambda state: None,
) -> str | None:
    """Block until ``job`` is finished or cancelled; its state then, or None on timeout.

    ``seen`` is called with each state the job is found in, once per change.
    A job seeded raw is running before it has a record (``states.shown_state``).
    Raises JobStateError if the job has neither a record nor counts.
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    last = None
    while True:
        read = calls.command("HGET", keys.jobs, job, writes=False)
        listed = not read and any(p.id == job for p in read_jobs(calls, keys))
        state = shown_state(read, listed)
        if state is None:
            raise JobStateError(f"no job {job} in {keys.jobs}")
        if state != last:
            seen(state)
            last = state
        if state in ENDED:
            return state
        if deadline is not None and time.monotonic() >= deadline:
            return None
        wait = poll if deadline is None else min(poll, max(deadline - time.monotonic(), 0))
        time.sleep(wait)
