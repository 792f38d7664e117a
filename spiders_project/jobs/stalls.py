"""A running job that fetches nothing: its "stalled" event, once per stall.

The rule is the alert CrawlerJobStalled's (deploy/prometheus/alerts.yml): a
running job with requests queued (backing off included) whose page count has
not moved for ``JOB_STALL_AFTER`` seconds (10 minutes, the alert's). The
workers' looks (``state_loop.JobWatch.look``, one worker a period) keep a mark
per such job in ``job_keys.job_stalls``: since when, its run and pages then,
and whether its event was written. The event goes to the jobs' events stream
as every state change does (so to the webhooks), through
``lua/job_stalled.lua``, which writes it only if the mark and the record are
still those the look read: one event per stall, even if two looks overlap.

A page fetched, a new run, the job no longer running (paused, cancelled,
finished) or nothing of it queued ends the stall: its mark goes, and a later
stall is a new one with its own event. Stalled is not a state: the job's
record stays ``running``. Unlike the alert, a job paused and resumed starts
counting again at the resume (the alert looks 10 minutes back, pause included).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from spiders_project.jobs.states import RUNNING, event_fields
from spiders_project.jobs.submit import LUA_DIR
from spiders_project.keys import RedisKeys
from spiders_project.keys.jobs import job_stalls
from spiders_project.read_model.job_progress import JobProgress
from spiders_project.redis_access import LuaScript, load_lua

STALLED = "stalled"
# The event's "via".
WHY = "nothing fetched"


@dataclass(frozen=True)
class Stall:
    """What a look does about one job's stall mark."""

    mark: str | None = None  # set the job's mark to this
    clear: bool = False  # remove the job's mark
    say: bool = False  # write its event (stalled_call)


NOTHING = Stall()


def stalled_script() -> LuaScript:
    """``lua/job_stalled.lua``."""
    return load_lua(LUA_DIR, "job_stalled")


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _seen(progress: JobProgress) -> str:
    """What must not change for the stall to go on: the run (its start) and the
    job's pages since its counts began."""
    return f"{progress.started_at or '-'}|{progress.totals.get('pages', progress.pages)}"


def stall_of(progress: JobProgress, mark: bytes | str | None, now_ms: int, stall_ms: int) -> Stall:
    """The look's verdict on ``progress`` (a job as ``job_progress`` reads it),
    whose mark is ``mark`` ("<since ms> <said 0|1> <seen>", None if it has none)."""
    waiting = progress.state == RUNNING and progress.queued + progress.backing_off > 0
    if not waiting:
        return Stall(clear=mark is not None)
    seen = _seen(progress)
    parts = _text(mark).split(" ") if mark else []
    if len(parts) != 3 or not parts[0].isdigit() or parts[2] != seen:
        return Stall(mark=f"{now_ms} 0 {seen}")
    if parts[1] == "0" and now_ms - int(parts[0]) >= stall_ms:
        return Stall(say=True)
    return NOTHING


def stalled_call(
    keys: RedisKeys,
    progress: JobProgress,
    record: bytes | str | None,
    mark: bytes | str,
    now_ms: int,
    events_max: int,
) -> tuple[list[str], list[Any]]:
    """KEYS and ARGV of ``lua/job_stalled.lua``: the event of ``progress``'s stall,
    whose mark was read as ``mark``; the event's ``since`` is when it began."""
    since, _, seen = _text(mark).split(" ", 2)
    return [job_stalls(keys), keys.jobs_events, keys.jobs], [
        progress.id,
        mark,
        f"{since} 1 {seen}",
        record or "",
        events_max,
        *event_fields(progress, WHY, now_ms),
        "since",
        since,
    ]
