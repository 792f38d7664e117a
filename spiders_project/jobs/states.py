"""A crawl job's states, and the one script that changes them (``lua/job_state.lua``).

A job is ``running``, ``paused``, ``cancelled`` or ``finished``. Its state
lives in its record in ``<spider>:jobs``; paused and cancelled jobs also have
a field in the job control hash (``job_keys.spider_job_control``), which the
workers read each second for the requests they already hold, and which the
frontier's lease and enqueue scripts read for the requests they move (a
sharded frontier has a copy per shard: :func:`control_writes`).

Who changes what:

- the operator (``scrapy jobs pause|resume|cancel``): running <-> paused,
  running or paused -> cancelled; ``scrapy jobs submit`` (or a schedule's
  tick) makes any job running again;
- the finish rule (``finish.py``, run by the workers' ``state_loop.py`` and,
  when no worker does, by the monitor): running -> finished once nothing of
  the job has been queued, backing off or leased for ``JOB_FINISH_GRACE``
  seconds; finished -> running when the job is seeded again (a raw seed
  naming it), and a job seen only in the counts (seeded raw) gets its record.

A job seeded raw is listed (``scrapy jobs list``) as running from its first
count on, before any look writes its record: the operator's changes take it
as running then (:func:`shown_state`), and the change writes its record.

Every change is a compare-and-set of the record the caller read, with the
control field, the quiet mark's removal and one event carrying the job's
counts, in one script: the stream and the record never disagree, and two
lookers (workers, monitors) finding the same job finished write one event.
The decisions are pure functions here, so the unit tests cover them without
Redis.
"""

from __future__ import annotations

import json
from typing import Any

from spiders_project.jobs.submit import LUA_DIR
from spiders_project.keys import RedisKeys
from spiders_project.keys.jobs import (
    host_jobs,
    job_control,
    job_counts,
    job_held,
    job_quiet,
    job_turns,
    spider_job_control,
)
from spiders_project.read_model.job_progress import COUNTS, JobProgress
from spiders_project.redis_access import LuaScript, load_lua

RUNNING = "running"
PAUSED = "paused"
CANCELLED = "cancelled"
FINISHED = "finished"
STATES = (RUNNING, PAUSED, CANCELLED, FINISHED)
# The states a job ends in, with ``scrapy jobs wait``'s exit status for each.
ENDED = {FINISHED: 0, CANCELLED: 3}
# The counts an event carries: a job's progress counts.
EVENT_COUNTS = COUNTS


class JobStateError(ValueError):
    """A change the job's state does not allow (pause a finished job, resume a running one)."""


def state_script() -> LuaScript:
    """``lua/job_state.lua``."""
    return load_lua(LUA_DIR, "job_state")


def restore_script() -> LuaScript:
    """``lua/restore_held.lua``."""
    return load_lua(LUA_DIR, "restore_held")


def purge_script() -> LuaScript:
    """``lua/purge_job.lua``."""
    return load_lua(LUA_DIR, "purge_job")


def state_of(raw: bytes | str | None) -> str | None:
    """The state in a job's record, None if it has no record (or one we cannot read)."""
    if not raw:
        return None
    try:
        record = json.loads(raw)
    except ValueError:
        return None
    state = record.get("state") if isinstance(record, dict) else None
    return state if state in STATES else None


def new_record(
    raw: bytes | str | None,
    job: str,
    state: str,
    now_ms: int,
    why: str,
    totals: dict[str, int] | None = None,
) -> str:
    """The record after the change: the read one with its new state and times.

    A job without a record (seeded raw) gets one, started now, "via" seeded
    whatever the change (it was seeded; the event says why it changed). A job that ends
    keeps its ``totals`` (``JobProgress.totals``) as "final"; one that runs
    again after it ended starts again now, its end time goes, and its counts
    start from those final ones ("base": a new run counts its own pages).
    """
    record: dict[str, Any] = {}
    if raw:
        try:
            loaded = json.loads(raw)
        except ValueError:
            loaded = None
        if isinstance(loaded, dict):
            record = loaded
    if not record:
        record = {"id": job, "via": "seeded", "seeds": [], "started_at": now_ms}
    was = record.get("state")
    record["state"] = state
    if state in ENDED:
        record["finished_at"] = now_ms
        if totals:
            record["final"] = totals
    elif state == RUNNING and was in ENDED:
        record["started_at"] = now_ms
        record.pop("finished_at", None)
        if isinstance(record.get("final"), dict):
            record["base"] = record.pop("final")
    return json.dumps(record, separators=(",", ":"))


def control_of(state: str) -> str:
    """The job control field of a state: "paused", "cancelled", or "" (none)."""
    return state if state in (PAUSED, CANCELLED) else ""


def event_fields(progress: JobProgress | None, why: str, now_ms: int) -> list[Any]:
    """The event's fields after job and state: why, when, and the job's counts."""
    fields: list[Any] = ["via", why, "at", now_ms]
    for name in EVENT_COUNTS:
        fields += [name, getattr(progress, name) if progress is not None else 0]
    return fields


def state_call(
    keys: RedisKeys,
    job: str,
    read: bytes | str | None,
    state: str,
    *,
    why: str,
    now_ms: int,
    progress: JobProgress | None,
    events_max: int,
) -> tuple[list[str], list[Any]]:
    """KEYS and ARGV of ``lua/job_state.lua``: ``job`` from its record ``read``
    (None: none) to ``state``."""
    return [keys.jobs, keys.jobs_events, spider_job_control(keys), job_quiet(keys)], [
        job,
        read or "",
        new_record(read, job, state, now_ms, why, progress.totals if progress else None),
        state,
        control_of(state),
        events_max,
        *event_fields(progress, why, now_ms),
    ]


def held_job(member: bytes) -> str:
    """The job of a member of the held set: "<job> <score> <#host> <host><request>"."""
    return member.split(b" ", 1)[0].decode("utf-8", "replace")


def restore_call(
    lane: RedisKeys, members: list[bytes], *, now: int | str = ""
) -> tuple[list[str], list[Any]]:
    """KEYS and ARGV of ``lua/restore_held.lua`` for ``members`` of ``lane``'s held set."""
    hosts = []
    for member in members:
        _, _, length, rest = member.split(b" ", 3)
        hosts.append(rest[: int(length)].decode("utf-8", "surrogateescape"))
    script_keys = [job_held(lane), lane.hosts, lane.requests_size, job_counts(lane)]
    script_keys += [lane.host_queue(h) for h in hosts]
    script_keys += [lane.host_list(h) for h in hosts]
    script_keys += [host_jobs(lane, h) for h in hosts]
    script_keys.append(job_turns(lane))
    return script_keys, [now, *members]


def control_writes(keys: RedisKeys, job: str, state: str) -> list[tuple[Any, ...]]:
    """The commands that copy a job's control field to each shard of a sharded
    frontier (none on one that is not: the shard's hash is the spider's)."""
    control = control_of(state)
    spider = spider_job_control(keys)
    out: list[tuple[Any, ...]] = []
    for shard in keys.all_shards:
        key = job_control(shard)
        if key != spider:
            out.append(("HSET", key, job, control) if control else ("HDEL", key, job))
    return out


def run_clears(keys: RedisKeys, job: str) -> list[tuple[Any, ...]]:
    """The commands a new run of ``job`` (a submit, a schedule's tick) sends first:
    neither the spider nor a shard keeps it paused or cancelled, and its quiet
    mark goes. Requests a pause set aside go back with the workers' next look
    (``state_loop.py``), or with ``scrapy jobs resume``."""
    return [
        ("HDEL", spider_job_control(keys), job),
        ("HDEL", job_quiet(keys), job),
        *control_writes(keys, job, RUNNING),
    ]


def shown_state(read: bytes | str | None, listed: bool) -> str | None:
    """The state ``scrapy jobs list`` shows a job in, from its record as read
    (``read``) and whether it has counts (``listed``): its record's; running for
    a job counted but without a record yet (seeded raw, before a look writes
    one); None for a job unknown, or whose record is not ours."""
    if not read:
        return RUNNING if listed else None
    return state_of(read)


def check_change(job: str, state: str | None, to: str) -> None:
    """Raise JobStateError unless an operator may take ``job`` from ``state`` to ``to``."""
    allowed = {
        PAUSED: (RUNNING,),
        RUNNING: (PAUSED,),
        CANCELLED: (RUNNING, PAUSED),
    }[to]
    if state not in allowed:
        now = f"is {state}" if state else "has no record"
        verb = {PAUSED: "pause", RUNNING: "resume", CANCELLED: "cancel"}[to]
        raise JobStateError(f"job {job} {now}: cannot {verb} it")
