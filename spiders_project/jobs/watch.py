"""The jobs as every worker sees them: paused and cancelled jobs, and jobs that finished.

:class:`JobWatch` (one per crawler) reads the spider's job control hash
(``job_keys.spider_job_control``) every ``JOBS_STATE_INTERVAL`` (1 s): one
HGETALL of a hash that is empty unless some job is paused or cancelled. What
it read serves :class:`JobStep`, for the requests this worker already holds
(prefetched, spares) when a job is paused or cancelled; those it leases
afterwards never reach it (the lease script sets a paused job's requests
aside and drops a cancelled job's, ``frontier/lua/lease.lua``). So from two
seconds after ``scrapy jobs pause``, no worker starts a download of the job.

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
from scrapy.exceptions import IgnoreRequest
from scrapy.statscollectors import StatsCollector

from spiders_project.crawl.meta import JOB
from spiders_project.frontier.context import WorkerRedis
from spiders_project.frontier.outcomes import request_dropped, request_held
from spiders_project.frontier.steps import HOLD, Hold
from spiders_project.jobs.config import JobsConfig
from spiders_project.jobs.states import (
    CANCELLED,
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
    DEFAULT_JOB,
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
    # whether or not FRONTIER_STEPS has JobStep.
    from_crawler = of

    def state(self, job: str) -> str | None:
        """ "paused", "cancelled", or None for a job that may be fetched."""
        return self.states.get(job)

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


# Stats of JobStep: requests of a paused job a worker held when the pause
# reached it (handed back, set aside), and of a cancelled job (dropped, purged).
HELD_BACK = "jobs/paused/held_back"
DROPPED = "jobs/cancelled/dropped"


class JobStep:
    """Requests of a paused or cancelled job that this worker already holds are not fetched.

    ``leased`` runs as the engine takes a request: a paused job's goes back to
    its queue (the lease script then sets it aside until the job resumes), a
    cancelled job's lease ends, counted purged for its job.
    """

    def __init__(self, watch: JobWatch, stats: StatsCollector) -> None:
        self.watch = watch
        self.stats = stats

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> JobStep:
        assert crawler.stats is not None
        return cls(JobWatch.of(crawler), crawler.stats)

    def leased(self, request: Request) -> Request | Hold | None:
        if not self.watch.states:
            return request
        state = self.watch.state(request.meta.get(JOB, DEFAULT_JOB))
        if state == PAUSED:
            self.stats.inc_value(HELD_BACK)
            return HOLD
        if state == CANCELLED:
            self.stats.inc_value(DROPPED)
            return None
        return request


# Stats of JobGate: requests stopped right before their download.
GATE_HELD = "jobs/paused/held_at_download"
GATE_DROPPED = "jobs/cancelled/dropped_at_download"


class JobGate:
    """The last check before a download: a request of a job paused or cancelled
    meanwhile does not start.

    A request passes ``JobStep`` when the engine takes it, then may wait for its
    host's turn (``HostGateMiddleware``, just before this one): a pause that
    comes during that wait is caught here. The request is not fetched; a paused
    job's lease goes back to its queue (``outcomes.request_held``), a cancelled
    job's counts purged (``outcomes.request_dropped``). The host's turn it took
    is lost: one turn per request that was on its way when the pause came.
    """

    def __init__(self, crawler: Crawler) -> None:
        assert crawler.stats is not None
        self.crawler = crawler
        self.stats = crawler.stats
        self.watch = JobWatch.of(crawler)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> JobGate:
        return cls(crawler)

    def process_request(self, request: Request) -> None:
        if not self.watch.states:
            return
        state = self.watch.state(request.meta.get(JOB, DEFAULT_JOB))
        if state == PAUSED:
            self.stats.inc_value(GATE_HELD)
            self.crawler.signals.send_catch_log(request_held, request=request)
            raise IgnoreRequest(f"job {request.meta.get(JOB, DEFAULT_JOB)} is paused")
        if state == CANCELLED:
            self.stats.inc_value(GATE_DROPPED)
            self.crawler.signals.send_catch_log(request_dropped, request=request)
            raise IgnoreRequest(f"job {request.meta.get(JOB, DEFAULT_JOB)} is cancelled")
