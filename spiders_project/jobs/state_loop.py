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

Every few seconds it also looks at every job's counts and turns the verdicts
of ``states.judge`` into state changes (finished, running again): one worker
a period looks (the first to take ``jobs:look``), and the compare-and-set in
``lua/job_state.lua`` keeps a change single even if two looks overlap. A
look that finds a job finished reads start_urls first, so a seed of the job
that no worker has taken yet keeps it running.
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
from spiders_project.jobs.states import (
    FINISHED,
    PAUSED,
    held_job,
    judge,
    restore_call,
    restore_script,
    seeds_pending,
    state_call,
    state_script,
)
from spiders_project.keys.jobs import (
    job_held,
    job_look,
    job_quiet,
    spider_job_control,
)
from spiders_project.plumbing.tasks import repeat, spawn_loop, stop_tasks
from spiders_project.plumbing.wiring import shared
from spiders_project.read_model.job_progress import count_keys, job_progress, summary

logger = logging.getLogger(__name__)

# Seeds read from start_urls before a job is called finished: enough for any
# backlog a running cluster has; a longer list is read in part (logged).
SEEDS_READ = 10_000
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
        """Whether this worker makes this period's look: the first to ask does, so
        the cluster reads every job once a period, however many workers run."""
        assert self.redis is not None
        look_ms = max(int(self.config.finish_look * 1000) - 100, 50)
        return bool(
            await self.redis.calls.command(
                "SET",
                job_look(self.redis.keys),
                self.redis.worker,
                "NX",
                "PX",
                look_ms,
                retry=False,
            )
        )

    async def look(self) -> int:
        """One look at every job's counts; the number of state changes this worker made."""
        assert self.redis is not None
        keys, calls = self.redis.keys, self.redis.calls
        clock, records, quiet = await calls.pipelined(
            "job states",
            [("TIME",), ("HGETALL", keys.jobs), ("HGETALL", job_quiet(keys))],
            retry=False,
        )
        now_ms = int(clock[0]) * 1000 + int(clock[1]) // 1000
        shards = await self.redis.pipelined(
            "job counts", [("HGETALL", key) for key in count_keys(keys)], retry=False
        )
        records = {_text(k): v for k, v in records.items()}
        quiet = {_text(k): v for k, v in quiet.items()}
        changed = 0
        grace_ms = int(self.config.finish_grace * 1000)
        for progress in job_progress(records, shards, now_ms):
            record = records.get(progress.id)
            mark = quiet.get(progress.id)
            verdict = judge(progress, record, mark, now_ms, grace_ms)
            if verdict.clear_quiet:
                await calls.command("HDEL", job_quiet(keys), progress.id, retry=False)
            if verdict.quiet is not None:
                await calls.command(
                    "HSET", job_quiet(keys), progress.id, verdict.quiet, retry=False
                )
            if verdict.state is None:
                continue
            if verdict.state == FINISHED and await self._seeds_pending(progress.id):
                # A seed of the job waits in start_urls: not finished; look again later.
                await calls.command(
                    "HSET", job_quiet(keys), progress.id, f"{now_ms} -1", retry=False
                )
                continue
            script_keys, args = state_call(
                keys,
                progress.id,
                record,
                verdict.state,
                why=verdict.why,
                now_ms=now_ms,
                progress=progress,
                events_max=self.config.events_max,
            )
            if int(await calls.script(self.script, script_keys, args, retry=False)) != 1:
                continue  # another worker made the change, or an operator did
            changed += 1
            self.stats.inc_value(f"jobs/{verdict.state}")
            progress.state = verdict.state
            logger.info(
                "Job %s %s (%s): %s", progress.id, verdict.state, verdict.why, summary(progress)
            )
        await self.restore_stray()
        return changed

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

    async def _seeds_pending(self, job: str) -> bool:
        assert self.redis is not None
        start_urls = self.redis.keys.start_urls
        entries = await self.redis.calls.command(
            "LRANGE", start_urls, 0, SEEDS_READ - 1, retry=False, writes=False
        )
        if len(entries) >= SEEDS_READ:
            logger.warning(
                "Job %s looks finished, but %s holds %d seeds or more: it is called finished "
                "only once no seed of it is among the first %d",
                job,
                start_urls,
                SEEDS_READ,
                SEEDS_READ,
            )
        return seeds_pending(entries, job)
