"""The finish rule: when a running job is finished, or runs again, decided from its counts.

One rule, run by whoever looks: every worker's state loop
(``state_loop.JobWatch``, asyncio) and, when no worker is left to look, the
monitor (:class:`FinishLooks`, a thread of ``python -m monitor`` with a
write-capable connection: docs/OPERATIONS.md, "Jobs"). A look is
:func:`finish_look`, a generator that yields the Redis steps it needs
(:class:`Reads`, :class:`Write`, :class:`Run`) and takes their replies, so the
rule and the order of its reads and writes are written once; each caller
drives it with its own call path (:func:`run_sync` here, ``JobWatch`` with the
worker's).

Lookers take turns: the first to set ``jobs:look`` (SET NX PX, a little less
than a period) makes the period's look, so the cluster reads every job once a
period however many workers and monitors run. Two looks that overlap anyway
(a look longer than its period) are safe: every state change is the
compare-and-set of ``lua/job_state.lua``, so one of them changes the job and
writes its event, and the other finds the record changed and does nothing.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import threading
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from typing import Any

import redis

from spiders_project.jobs.states import FINISHED, RUNNING, state_call, state_of, state_script
from spiders_project.keys import RedisKeys
from spiders_project.keys.jobs import DEFAULT_JOB, job_look, job_quiet
from spiders_project.read_model.job_progress import JobProgress, count_keys, job_progress, summary
from spiders_project.redis_access import LuaScript, RedisUnavailable, SyncRedisCalls

logger = logging.getLogger(__name__)

# Seeds read from start_urls before a job is called finished: enough for any
# backlog a running cluster has; a longer list is read in part (logged).
SEEDS_READ = 10_000


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


@dataclass(frozen=True)
class Verdict:
    """What a look does about one job after reading its counts."""

    state: str | None = None  # change the job's state to this (job_state.lua)
    why: str = ""
    quiet: str | None = None  # set the job's quiet mark to this
    clear_quiet: bool = False  # remove the job's quiet mark


NOTHING = Verdict()


def ended_count(progress: JobProgress) -> int:
    """A count that grows with everything the job's requests go through: leases
    ended, and requests purged (dropped without a lease)."""
    totals = progress.totals
    return totals.get("acked", progress.acked) + totals.get("purged", progress.purged)


def judge(
    progress: JobProgress,
    record: bytes | str | None,
    quiet: bytes | str | None,
    now_ms: int,
    grace_ms: int,
) -> Verdict:
    """The verdict on one job.

    ``quiet`` is the job's mark "<since ms> <ended count then>", set the first
    time a look finds nothing of it queued, backing off or leased; the job is
    finished once a look finds the same, with the same ended count, at least
    ``grace_ms`` later. Any activity in between (a lease ended, a request
    purged) changes the count, so activity between two looks is not missed.
    A job without a record (seeded raw) is running, as ``scrapy jobs list``
    shows it: it gets its record when a look finds it active, or when it is
    finished.
    """
    state = state_of(record)
    if progress.active:
        if state is None:
            return Verdict(state=RUNNING, why="seeded")
        if state == FINISHED:
            return Verdict(state=RUNNING, why="seeded again")
        return Verdict(clear_quiet=quiet is not None)
    if state not in (RUNNING, None):
        return NOTHING
    ended = ended_count(progress)
    mark = _text(quiet).split() if quiet else []
    if len(mark) == 2 and all(part.lstrip("-").isdigit() for part in mark):
        since, then = int(mark[0]), int(mark[1])
        if then == ended:
            if now_ms - since >= grace_ms:
                return Verdict(state=FINISHED, why="nothing left")
            return NOTHING
    return Verdict(quiet=f"{now_ms} {ended}")


def seeds_pending(entries: list[bytes], job: str) -> bool:
    """Whether any start_urls entry names ``job`` (a seed no worker took yet);
    for ``default``, any entry that names no job."""
    if job == DEFAULT_JOB:
        return any(b'"job"' not in entry for entry in entries)
    named = re.compile(rb'"job"\s*:\s*"' + re.escape(job.encode()) + rb'"')
    return any(named.search(entry) for entry in entries)


# --- the look, as steps any call path can run ----------------------------------------


@dataclass(frozen=True)
class Reads:
    """Read-only commands; the reply is their replies, in order. ``spread``: they
    name keys of several slots (each frontier shard's hash, on a Redis Cluster),
    each its key first; else every key is in the spider's slot."""

    name: str
    commands: list[tuple[Any, ...]]
    spread: bool = False


@dataclass(frozen=True)
class Write:
    """One write command; the reply is its reply."""

    command: tuple[Any, ...]


@dataclass(frozen=True)
class Run:
    """One call of ``lua/job_state.lua``; the reply is the script's."""

    keys: list[str]
    args: list[Any]


Step = Reads | Write | Run


@dataclass
class Change:
    """A state change a look made (its job's progress carries the new state)."""

    progress: JobProgress
    why: str


@dataclass
class LookResult:
    """What one look read and did: the time (Redis' clock, ms), the jobs'
    records as read (id -> raw record), every job's progress, and the changes
    it made."""

    now_ms: int
    records: dict[str, Any] = field(default_factory=dict)
    jobs: list[JobProgress] = field(default_factory=list)
    changes: list[Change] = field(default_factory=list)


Look = Generator[Step, Any, LookResult]


def finish_look(keys: RedisKeys, *, grace_ms: int, events_max: int) -> Look:
    """One look at every job of ``keys``' spider: the rule above, as steps.

    A job found finished is called so only if no seed of it waits in
    start_urls (read then, once per job found finished): a seed no worker
    took yet keeps it running, and the look after next tries again.
    """
    clock, records, quiet = yield Reads(
        "job states", [("TIME",), ("HGETALL", keys.jobs), ("HGETALL", job_quiet(keys))]
    )
    now_ms = int(clock[0]) * 1000 + int(clock[1]) // 1000
    shards = yield Reads("job counts", [("HGETALL", key) for key in count_keys(keys)], spread=True)
    records = {_text(k): v for k, v in records.items()}
    quiet = {_text(k): v for k, v in quiet.items()}
    result = LookResult(now_ms, records, job_progress(records, shards, now_ms))
    for progress in result.jobs:
        record = records.get(progress.id)
        verdict = judge(progress, record, quiet.get(progress.id), now_ms, grace_ms)
        if verdict.clear_quiet:
            yield Write(("HDEL", job_quiet(keys), progress.id))
        if verdict.quiet is not None:
            yield Write(("HSET", job_quiet(keys), progress.id, verdict.quiet))
        if verdict.state is None:
            continue
        if verdict.state == FINISHED:
            (entries,) = yield Reads("start_urls", [("LRANGE", keys.start_urls, 0, SEEDS_READ - 1)])
            if len(entries) >= SEEDS_READ:
                logger.warning(
                    "Job %s looks finished, but %s holds %d seeds or more: it is called "
                    "finished only once no seed of it is among the first %d",
                    progress.id,
                    keys.start_urls,
                    SEEDS_READ,
                    SEEDS_READ,
                )
            if seeds_pending(entries, progress.id):
                # Not finished: a seed of it waits; the quiet mark starts again.
                yield Write(("HSET", job_quiet(keys), progress.id, f"{now_ms} -1"))
                continue
        script_keys, args = state_call(
            keys,
            progress.id,
            record,
            verdict.state,
            why=verdict.why,
            now_ms=now_ms,
            progress=progress,
            events_max=events_max,
        )
        if int((yield Run(script_keys, args))) != 1:
            continue  # another look made the change, or an operator did
        progress.state = verdict.state
        result.changes.append(Change(progress, verdict.why))
        logger.info(
            "Job %s %s (%s): %s", progress.id, verdict.state, verdict.why, summary(progress)
        )
    return result


def turn_command(keys: RedisKeys, looker: str, look_s: float) -> tuple[Any, ...]:
    """The SET that makes ``looker`` this period's looker if it is the first (reply: OK)."""
    look_ms = max(int(look_s * 1000) - 100, 50)
    return ("SET", job_look(keys), looker, "NX", "PX", look_ms)


def run_sync(
    look: Look, calls: SyncRedisCalls, script: LuaScript, *, retry: bool = False
) -> LookResult:
    """Drive ``look`` with a blocking call path (one command a read: on a Redis
    Cluster the shards' counts are in different slots)."""
    reply: Any = None
    try:
        while True:
            step = look.send(reply)
            if isinstance(step, Reads):
                reply = [calls.command(*c, retry=retry, writes=False) for c in step.commands]
            elif isinstance(step, Write):
                reply = calls.command(*step.command, retry=retry)
            else:
                reply = calls.script(script, step.keys, step.args, retry=retry)
    except StopIteration as done:
        result: LookResult = done.value
        return result


# --- the monitor's looks ------------------------------------------------------------------


class FinishLooks:
    """The finish rule in a process that is no worker (``python -m monitor``).

    Every ``look_s`` it asks for each spider's turn and, when it gets one, makes
    the look: a job whose workers all exited (closed when idle) is finished
    ``JOB_FINISH_GRACE`` after its last page all the same. ``calls`` must be
    able to write the jobs' keys and run scripts (the operator's user); the
    monitor's own user reads only, and its connection stays so.
    """

    def __init__(
        self,
        calls: SyncRedisCalls,
        spiders: Sequence[str],
        keys_of: Callable[[str], RedisKeys],
        *,
        look_s: float,
        grace_s: float,
        events_max: int,
    ) -> None:
        self.calls = calls
        self.spiders = tuple(spiders)
        self.keys_of = keys_of
        self.look_s = look_s
        self.grace_ms = int(grace_s * 1000)
        self.events_max = events_max
        self.script = state_script()
        self.looker = f"monitor:{socket.gethostname()}:{os.getpid()}"
        self._failing: str | None = None  # the last failure logged, until a look succeeds

    def look(self, spider: str) -> LookResult | None:
        """One period of ``spider``: its look if this process has the turn, else None."""
        keys = self.keys_of(spider)
        if not self.calls.command(*turn_command(keys, self.looker, self.look_s), retry=False):
            return None
        look = finish_look(keys, grace_ms=self.grace_ms, events_max=self.events_max)
        return run_sync(look, self.calls, self.script)

    def run(self, stop: threading.Event) -> None:
        """Look every period until ``stop`` is set; a failure is one log line per change."""
        while not stop.wait(self.look_s):
            for spider in self.spiders:
                try:
                    self.look(spider)
                except (RedisUnavailable, redis.RedisError) as exc:
                    text = f"{type(exc).__name__}: {exc}"
                    if text != self._failing:
                        logger.warning(
                            "Jobs of %s not looked at (%s); next look in %.1f s",
                            spider,
                            text,
                            self.look_s,
                        )
                        self._failing = text
                    continue
                if self._failing is not None:
                    logger.info("Jobs of %s looked at again", spider)
                    self._failing = None
