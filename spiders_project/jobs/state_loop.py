"""The jobs as every worker sees them, and the worker's looks that find jobs finished.

:class:`JobWatch` (one per crawler, an extension) reads the spider's job
control hash (``job_keys.spider_job_control``) every ``JOBS_STATE_INTERVAL``
(1 s): one HGETALL of a hash that is empty unless some job is paused or
cancelled. What it read serves the two checks on the requests this worker
already holds (prefetched, spares) when a job is paused or cancelled:
``pause_step.JobStep`` as the engine takes a request, and
``fetch_gate.JobGate`` right before its download. Those it leases afterwards
never reach them (the lease script sets a paused job's requests aside and
drops a cancelled job's, ``frontier/lua/lease.lua``). So from two seconds
after ``scrapy jobs pause``, no worker starts a download of the job.

Every few seconds it also runs the finish rule (``finish.py``): a look at
every job's counts whose verdicts become state changes (finished, running
again). One looker a period looks, a worker or a monitor (the first to take
``jobs:look``), and the compare-and-set in ``lua/job_state.lua`` keeps a
change single even if two looks overlap. A worker's look then turns the
verdicts of ``stalls.stall_of`` into "stalled" events (a running job with work
queued that fetches nothing, once per stall; ``lua/job_stalled.lua``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from scrapy import Request, signals
from scrapy.crawler import Crawler
from scrapy.statscollectors import StatsCollector

from spiders_project.crawl.meta import job_of
from spiders_project.frontier.context import WorkerRedis
from spiders_project.jobs.config import JobsConfig
from spiders_project.jobs.finish import (
    Look,
    LookResult,
    Reads,
    Write,
    finish_look,
    turn_command,
)
from spiders_project.jobs.stalls import STALLED, stall_of, stalled_call, stalled_script
from spiders_project.jobs.states import (
    PAUSED,
    held_job,
    restore_call,
    restore_script,
    state_script,
)
from spiders_project.keys.jobs import job_held, job_stalls, spider_job_control
from spiders_project.plumbing.tasks import repeat, spawn_loop, stop_tasks
from spiders_project.plumbing.wiring import shared
from spiders_project.read_model.job_progress import JobProgress, summary

logger = logging.getLogger(__name__)

# Members of a held set read at once, and reads a look makes of one (a long
# paused part is skipped with one range).
STRAY_BATCH = 500
STRAY_READS = 20


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


class JobWatch:
    """This worker's copy of the paused and cancelled jobs, and its finish looks."""

    def __init__(
        self, redis: WorkerRedis | None, config: JobsConfig, stats: StatsCollector
    ) -> None:
        self.redis = redis
        self.config = config
        self.stats = stats
        # job -> "paused" / "cancelled", as last read; empty in most crawls.
        self.states: dict[str, str] = {}
        self.script = state_script()
        self.restore = restore_script()
        self.stalled = stalled_script()
        self._tasks: list[asyncio.Task[None]] = []

    @classmethod
    def of(cls, crawler: Crawler) -> JobWatch:
        """The crawler's one watch; its loop runs while the spider is open."""

        def build() -> JobWatch:
            assert crawler.stats is not None
            redis = WorkerRedis.of(crawler)
            watch = cls(redis, JobsConfig.from_settings(crawler.settings), crawler.stats)
            crawler.signals.connect(watch.spider_opened, signal=signals.spider_opened)
            crawler.signals.connect(watch.spider_closed, signal=signals.spider_closed)
            return watch

        return shared(crawler, cls, build)

    # Also an extension (EXTENSIONS): the finish looks run in every worker,
    # whether or not FRONTIER_STEPS has JobStep or the downloader JobGate.
    from_crawler = of

    def state_of(self, request: Request) -> str | None:
        """ "paused" or "cancelled" for a request of such a job; None for one that may
        be fetched. With no job controlled (most crawls) it reads no meta."""
        if not self.states:
            return None
        return self.states.get(job_of(request.meta))

    def update(self, entries: dict[Any, Any]) -> None:
        """Take a HGETALL of the job control hash; one line per change."""
        states = {_text(k): _text(v) for k, v in entries.items()}
        if states != self.states:
            for job, state in sorted(states.items()):
                if self.states.get(job) != state:
                    logger.info("Job %s is %s: its requests are not fetched", job, state)
            for job in sorted(set(self.states) - set(states)):
                logger.info("Job %s is no longer %s", job, self.states[job])
        self.states = states

    def spider_opened(self) -> None:
        if self.redis is not None and not self._tasks:
            # Two loops: a slow look never delays the next read of the control.
            self._tasks = [
                spawn_loop("job states", self._repeat(self.config.state_interval, self.refresh)),
                spawn_loop("job looks", self._repeat(self.config.finish_look, self._look)),
            ]

    async def spider_closed(self) -> None:
        if self._tasks:
            await stop_tasks(self._tasks)
            self._tasks = []

    async def refresh(self) -> None:
        """One read of the job control hash."""
        assert self.redis is not None
        entries = await self.redis.calls.command(
            "HGETALL", spider_job_control(self.redis.keys), retry=False, writes=False
        )
        self.update(entries)

    def _repeat(
        self, interval: float, step: Callable[[], Awaitable[None]]
    ) -> Coroutine[Any, Any, None]:
        return repeat(step, interval, "Looking at the jobs' states", logger)

    async def _look(self) -> None:
        if await self._my_turn():
            await self.look()

    async def _my_turn(self) -> bool:
        """Whether this worker makes this period's look (``finish.turn_command``)."""
        assert self.redis is not None
        command = turn_command(self.redis.keys, self.redis.worker, self.config.finish_look)
        return bool(await self.redis.calls.command(*command, retry=False))

    async def look(self) -> int:
        """One look at every job's counts (``finish.finish_look``); the number of
        state changes this worker made."""
        assert self.redis is not None
        look = finish_look(
            self.redis.keys,
            grace_ms=int(self.config.finish_grace * 1000),
            events_max=self.config.events_max,
        )
        result = await self._run(look)
        for change in result.changes:
            self.stats.inc_value(f"jobs/{change.progress.state}")
        stalls = await self.redis.calls.command(
            "HGETALL", job_stalls(self.redis.keys), retry=False, writes=False
        )
        marks = {_text(k): v for k, v in stalls.items()}
        await self._stalls(result.jobs, result.records, marks, result.now_ms)
        await self.restore_stray()
        return len(result.changes)

    async def _run(self, look: Look) -> LookResult:
        """Drive a look with this worker's call path."""
        assert self.redis is not None
        calls = self.redis.calls
        reply: Any = None
        try:
            while True:
                step = look.send(reply)
                if isinstance(step, Reads):
                    send = self.redis.pipelined if step.spread else calls.pipelined
                    reply = await send(step.name, step.commands, retry=False)
                elif isinstance(step, Write):
                    reply = await calls.command(*step.command, retry=False)
                else:
                    reply = await calls.script(self.script, step.keys, step.args, retry=False)
        except StopIteration as done:
            result: LookResult = done.value
            return result

    async def _stalls(
        self, jobs: list[JobProgress], records: dict[str, Any], marks: dict[str, Any], now_ms: int
    ) -> None:
        """The running jobs that fetch nothing: each stall's one event (``stalls.py``).
        Runs after the state changes of the look, so a job just finished is not stalled."""
        assert self.redis is not None
        keys, calls = self.redis.keys, self.redis.calls
        stall_ms = int(self.config.stall_after * 1000)
        gone = set(marks) - {progress.id for progress in jobs}
        if gone:  # jobs no longer counted (their counts removed)
            await calls.command("HDEL", job_stalls(keys), *sorted(gone), retry=False)
        for progress in jobs:
            mark = marks.get(progress.id)
            stall = stall_of(progress, mark, now_ms, stall_ms)
            if stall.clear:
                await calls.command("HDEL", job_stalls(keys), progress.id, retry=False)
            elif stall.mark is not None:
                await calls.command("HSET", job_stalls(keys), progress.id, stall.mark, retry=False)
            elif stall.say and mark is not None:
                script_keys, args = stalled_call(
                    keys, progress, records.get(progress.id), mark, now_ms, self.config.events_max
                )
                if int(await calls.script(self.stalled, script_keys, args, retry=False)) == 1:
                    self.stats.inc_value(f"jobs/{STALLED}")
                    logger.warning(
                        "Job %s stalled: %d requests queued, no page fetched for %.0f s: %s",
                        progress.id,
                        progress.queued + progress.backing_off,
                        self.config.stall_after,
                        summary(progress),
                    )

    async def restore_stray(self) -> int:
        """Requests set aside for a job that is no longer paused go back to their
        queues: a resume cut short, or a new run (submit, a schedule's tick) of a
        paused job. The held set is ordered by job: a paused job's part is skipped
        with one range, so a look costs one read per shard and lane when empty."""
        assert self.redis is not None
        restored = 0
        for lane, calls in self.redis.queue_calls():
            start = "-"
            for _ in range(STRAY_READS):
                members = await calls.command(
                    "ZRANGEBYLEX",
                    job_held(lane),
                    start,
                    "+",
                    "LIMIT",
                    0,
                    STRAY_BATCH,
                    retry=False,
                    writes=False,
                )
                if not members:
                    break
                stray = [m for m in members if self.states.get(held_job(m)) != PAUSED]
                if stray:
                    script_keys, args = restore_call(lane, stray)
                    restored += int(
                        await calls.script(self.restore, script_keys, args, retry=False)
                    )
                else:
                    start = f"({held_job(members[-1])}!"  # past that paused job's part
        if restored:
            logger.info("Put back %d requests of jobs no longer paused", restored)
            self.stats.inc_value("jobs/held_restored", restored)
        return restored
