"""Schedules: a job submitted again on a cron timetable, each tick once for the whole cluster.

``scrapy jobs schedule ID --cron "0 3 * * *" URL...`` stores a
:class:`Schedule` in ``<spider>:jobs:schedules`` (cron expressions in UTC,
read by croniter). Every worker runs :class:`JobSchedules`, which looks at
the schedules every ``JOBS_SCHEDULE_INTERVAL`` seconds:

- the time is Redis' (``TIME``, one clock for every node): a worker whose own
  clock is off neither runs a tick early nor runs one twice;
- a schedule is due when the latest time its cron expression names, at or
  before now, is later than the last tick it ran (kept in its entry). Only
  that latest tick runs: ticks missed while the whole cluster was down run
  once when it is back, not once each;
- ``lua/schedule_tick.lua`` claims the tick by compare-and-set of the entry
  the worker read and submits the run in the same step, so however many
  workers look, and however often they restart, one of them runs it.

Each run fetches the job's pages again, once: with RECRAWL_AFTER set (the
seen-set keeps times), its seeds carry ``"recrawl_after"`` of half the
interval between the tick before this one and this one (:func:`run_recrawl_after`,
``submit.rerun_recrawl_after``), which every page below them inherits. A page
the previous run fetched is due again; one this run fetched is not, until
half an interval later. Without RECRAWL_AFTER only the seeds are fetched
again (the worker says so once).

A stored schedule that cannot be read (bad JSON, a cron expression croniter
refuses) is skipped with one log line, until it changes; the worker carries on.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from croniter import CroniterError, croniter
from scrapy import signals
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured
from scrapy.statscollectors import StatsCollector

from spiders_project.frontier.context import WorkerRedis
from spiders_project.frontier.seen import TIME_STEPS
from spiders_project.jobs.config import JobsConfig
from spiders_project.jobs.states import run_clears
from spiders_project.jobs.submit import (
    LUA_DIR,
    SCHEDULE,
    InvalidJob,
    JobSpec,
    rerun_recrawl_after,
    run_args,
)
from spiders_project.keys import RedisKeys
from spiders_project.plumbing.tasks import spawn_loop, stop_tasks
from spiders_project.read_model.job_progress import count_keys, job_progress
from spiders_project.redis_access import LuaScript, RedisUnavailable, load_lua

logger = logging.getLogger(__name__)


class InvalidSchedule(ValueError):
    """A schedule that cannot be run: a bad cron expression, or an entry we did not write."""


def tick_script() -> LuaScript:
    """``lua/schedule_tick.lua``."""
    return load_lua(LUA_DIR, "schedule_tick")


def check_cron(cron: str) -> str:
    """``cron`` if croniter reads it; raises InvalidSchedule with croniter's reason."""
    try:
        croniter(cron, 0)
    except (CroniterError, ValueError, TypeError) as exc:
        raise InvalidSchedule(f"bad cron expression {cron!r}: {exc}") from None
    return cron


def latest_tick(cron: str, now_ms: int) -> int:
    """The latest time (ms) ``cron`` names at or before ``now_ms``, in UTC."""
    # croniter's get_prev is strictly before its start: start just after now.
    start = datetime.fromtimestamp((now_ms + 1) / 1000, UTC)
    return round(float(croniter(cron, start).get_prev(float)) * 1000)


def next_tick(cron: str, now_ms: int) -> int:
    """The first time (ms) ``cron`` names after ``now_ms``, in UTC."""
    start = datetime.fromtimestamp(now_ms / 1000, UTC)
    return round(float(croniter(cron, start).get_next(float)) * 1000)


def run_recrawl_after(cron: str, tick: int) -> float | None:
    """The ``recrawl_after`` (seconds) of the run at ``tick``: half the time since
    the tick ``cron`` names before it (``submit.rerun_recrawl_after``).

    The timetable's own interval, not the time since the last run: a first
    run (scheduled a second before its tick) still gets a whole interval, and
    a run after ticks missed while the cluster was down gets what its
    timetable promises.
    """
    start = datetime.fromtimestamp(tick / 1000, UTC)
    before = round(float(croniter(cron, start).get_prev(float)) * 1000)
    return rerun_recrawl_after(tick - before)


@dataclass(frozen=True)
class Schedule:
    """A job's timetable (``cron``), what each run submits, and the last tick it ran (ms).

    ``tick`` starts as the time it was scheduled, so the first run is the
    first tick after that.
    """

    cron: str
    spec: JobSpec
    tick: int

    def to_json(self) -> str:
        return json.dumps({"cron": self.cron, "tick": self.tick, **self.spec.to_dict()})

    @classmethod
    def from_json(cls, job: str, raw: bytes | str) -> Schedule:
        """The schedule of ``job`` as stored; raises InvalidSchedule (never unpickles)."""
        try:
            data = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            raise InvalidSchedule(f"not JSON: {exc}") from None
        if not isinstance(data, dict):
            raise InvalidSchedule("not a JSON object")
        cron, tick = data.pop("cron", None), data.pop("tick", None)
        if not isinstance(cron, str):
            raise InvalidSchedule("cron must be a string")
        if not isinstance(tick, int) or isinstance(tick, bool):
            raise InvalidSchedule("tick must be an integer (ms)")
        try:
            spec = JobSpec.from_dict(job, data)
        except InvalidJob as exc:
            raise InvalidSchedule(str(exc)) from None
        return cls(check_cron(cron), spec, tick)

    def due(self, now_ms: int) -> int | None:
        """The tick to run at ``now_ms``, or None when the latest one has run."""
        tick = latest_tick(self.cron, now_ms)
        return tick if tick > self.tick else None


def tick_call(
    keys: RedisKeys,
    schedule: Schedule,
    raw: bytes | str,
    tick: int,
    *,
    events_max: int,
    now: int | str = "",
    recrawl_after: float | None = None,
    base: dict[str, int] | None = None,
) -> tuple[list[str], list[Any]]:
    """KEYS and ARGV of ``lua/schedule_tick.lua``: run ``tick`` of ``schedule``, read as ``raw``
    (its seeds with ``recrawl_after``: :func:`run_recrawl_after`; ``base``: the
    job's counts now, ``submit.run_args``)."""
    claimed = replace(schedule, tick=tick).to_json()
    run = f"t{tick // 1000}"
    args = run_args(
        schedule.spec,
        run,
        via=SCHEDULE,
        events_max=events_max,
        tick=tick,
        recrawl_after=recrawl_after,
        base=base,
    )
    script_keys = [keys.job_schedules, keys.jobs, keys.jobs_events, keys.start_urls]
    return script_keys, [now, tick, raw, claimed, *args]


def _text(value: bytes | str) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


class JobSchedules:
    """Every worker's schedule loop (module docstring); a Scrapy extension."""

    def __init__(self, redis: WorkerRedis, config: JobsConfig, stats: StatsCollector) -> None:
        self.redis = redis
        self.config = config
        self.stats = stats
        self.script = tick_script()
        # Each schedule's entry as last read, and what it said (None: unreadable,
        # logged once until it changes): an entry is parsed, its URLs and
        # regexes checked, only when it changes, not at every look.
        self._known: dict[str, tuple[bytes | str, Schedule | None]] = {}
        # Said once: the runs fetch only their seeds again (no RECRAWL_AFTER),
        # and the jobs whose interval is short for the seen-set's unit.
        self._said_untimed = False
        self._said_coarse: set[str] = set()
        self._task: asyncio.Task[None] | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> JobSchedules:
        config = JobsConfig.from_settings(crawler.settings)
        if not config.schedules_enabled:
            raise NotConfigured("JOBS_SCHEDULES_ENABLED is off")
        assert crawler.stats is not None
        schedules = cls(WorkerRedis.of(crawler), config, crawler.stats)
        crawler.signals.connect(schedules.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(schedules.spider_closed, signal=signals.spider_closed)
        return schedules

    def spider_opened(self) -> None:
        self._task = spawn_loop("job schedules", self._loop())

    async def spider_closed(self) -> None:
        if self._task is not None:
            await stop_tasks([self._task])

    async def _loop(self) -> None:
        logger.info(
            "Running the jobs' schedules in %s, looking every %.1f s",
            self.redis.keys.job_schedules,
            self.config.schedule_interval,
        )
        failing = ""
        while True:
            if self.redis.state.connected:
                try:
                    await self.check()
                except RedisUnavailable:
                    pass  # the call path logs Redis' state changes
                except Exception as exc:  # noqa: BLE001 - the next look reads everything again
                    # One line per new failure, not one a second: a broken
                    # key (WRONGTYPE) or a test clock file missing.
                    if repr(exc) != failing:
                        logger.error("Looking at the jobs' schedules failed: %r", exc)
                    failing = repr(exc)
                else:
                    failing = ""
            await asyncio.sleep(self.config.schedule_interval)

    def _test_now(self) -> int | None:
        """The time the test clock file holds (JOBS_SCHEDULE_TEST_CLOCK), or None."""
        if not self.config.test_clock:
            return None
        return int(Path(self.config.test_clock).read_text().strip())

    async def check(self) -> int:
        """Run the due ticks of every schedule; the number this worker ran."""
        keys = self.redis.keys
        test_now = self._test_now()
        time, entries = await self.redis.calls.pipelined(
            "job schedules", [("TIME",), ("HGETALL", keys.job_schedules)], retry=False
        )
        now_ms = test_now if test_now is not None else int(time[0]) * 1000 + int(time[1]) // 1000
        self.stats.inc_value("jobs/schedule_checks")
        ran = 0
        found: set[str] = set()
        for field, raw in entries.items():
            # The entry stays as Redis gave it: the script compares it byte
            # for byte, and one that is not UTF-8 is refused by from_json.
            job = _text(field)
            found.add(job)
            schedule = self._read(job, raw)
            tick = schedule.due(now_ms) if schedule is not None else None
            if schedule is None or tick is None:
                continue
            recrawl_after = self._recrawl_after(job, schedule, tick)
            base = await self._totals(job)
            script_keys, args = tick_call(
                keys,
                schedule,
                raw,
                tick,
                events_max=self.config.events_max,
                now="" if test_now is None else test_now,
                recrawl_after=recrawl_after,
                base=base,
            )
            # A run makes its job run, as a submit does: first no shard keeps
            # it paused or cancelled (its seeds would be set aside or dropped).
            for command in run_clears(keys, job):
                await self.redis.calls.command(*command, retry=False)
            answer = await self.redis.calls.script(self.script, script_keys, args, retry=False)
            if int(answer) != 1:
                continue  # another worker ran it, or the schedule changed
            ran += 1
            self.stats.inc_value("jobs/scheduled_runs")
            logger.info(
                "Job %s started by its schedule (%s, tick %s), seeds: %d, recrawl_after: %s",
                job,
                schedule.cron,
                datetime.fromtimestamp(tick / 1000, UTC).isoformat(),
                len(schedule.spec.urls),
                "none" if recrawl_after is None else f"{recrawl_after:g} s",
            )
        self._known = {job: known for job, known in self._known.items() if job in found}
        return ran

    def _recrawl_after(self, job: str, schedule: Schedule, tick: int) -> float | None:
        """The run's ``recrawl_after`` (module docstring), or None without RECRAWL_AFTER."""
        seen = self.redis.seen
        if not seen.timed:
            if not self._said_untimed:
                self._said_untimed = True
                logger.warning(
                    "RECRAWL_AFTER is 0: the seen-set keeps no times, so a scheduled run "
                    "fetches only its seeds again, not the pages below them (job %s)",
                    job,
                )
            return None
        after = run_recrawl_after(schedule.cron, tick)
        unit = seen.recrawl_after / TIME_STEPS
        if after is not None and unit > after / 2 and job not in self._said_coarse:
            # The seen-set tells times apart only to a unit: a page may come
            # due a unit early or late, a large share of this half interval.
            self._said_coarse.add(job)
            logger.warning(
                "Job %s: its runs fetch pages last fetched over %g s ago again, but the "
                "seen-set counts time in units of %g s (RECRAWL_AFTER / %d): a run may "
                "fetch a page twice or miss one of the last run's; a RECRAWL_AFTER of "
                "at most %g s fits this schedule",
                job,
                after,
                unit,
                TIME_STEPS,
                after * TIME_STEPS / 2,
            )
        return after

    async def _totals(self, job: str) -> dict[str, int]:
        """The job's counts since they began: the base of the run a tick starts."""
        shards = await self.redis.pipelined(
            "job counts", [("HGETALL", key) for key in count_keys(self.redis.keys)], retry=False
        )
        found = [p for p in job_progress({}, shards, 0) if p.id == job]
        return dict(found[0].totals) if found else {}

    def _read(self, job: str, raw: bytes | str) -> Schedule | None:
        """The schedule stored for ``job``, or None (logged once per entry) if unreadable."""
        known = self._known.get(job)
        if known is not None and known[0] == raw:
            return known[1]
        schedule: Schedule | None = None
        try:
            schedule = Schedule.from_json(job, raw)
        except InvalidSchedule as exc:
            self.stats.inc_value("jobs/schedules_invalid")
            logger.error(
                "Skipping the schedule of job %s in %s: %s",
                job,
                self.redis.keys.job_schedules,
                exc,
            )
        self._known[job] = (raw, schedule)
        return schedule
