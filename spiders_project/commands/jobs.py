"""``scrapy jobs submit|schedule|unschedule|list|show|pause|resume|cancel|wait``: crawl jobs.

Examples::

    scrapy jobs submit shop-x https://shop.example/ --max-pages 5000 --max-depth 6
    scrapy jobs submit docs https://a.example/ https://b.example/ --allow '^https://[ab]\\.' --json
    scrapy jobs schedule nightly --cron "0 3 * * *" https://news.example/ --max-pages 500
    scrapy jobs unschedule nightly
    scrapy jobs list [--json]
    scrapy jobs show shop-x [--json]
    scrapy jobs pause shop-x
    scrapy jobs resume shop-x
    scrapy jobs cancel shop-x --json
    scrapy jobs wait shop-x --timeout 3600

``submit`` writes one JSON seed per URL into ``<spider>:start_urls``, all
with ``"job": ID``, and records the job as running (``jobs/submit.py``);
``--max-pages`` is one budget for the whole job. ``schedule`` stores the same
for the workers to submit at every tick of the cron expression (UTC;
``jobs/schedules.py``); ``unschedule`` removes it. A bad job id, URL, regex
or cron expression is one ``ERROR:`` line and exit status 2, before Redis is
touched. ``list`` and ``show`` print each job's progress
(``job_progress.py``: exact counts, pages/s over the last minute, an ETA).
``pause``, ``resume`` and ``cancel`` change a job's state (``jobs/control.py``);
``wait`` blocks until the job ends: exit status 0 finished, 3 cancelled, 4 on
timeout (``WAIT_EXIT``), so a script can chain crawls.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from typing import Any

import redis
from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from spiders_project.commands.redis_command import RedisCommand, redis_error
from spiders_project.jobs.config import JobsConfig
from spiders_project.jobs.control import (
    change_state,
    purge_job,
    restore_held,
    submit_run,
    wait_for_end,
)
from spiders_project.jobs.schedules import InvalidSchedule, Schedule, check_cron, next_tick
from spiders_project.jobs.states import CANCELLED, FINISHED, PAUSED, RUNNING, JobStateError
from spiders_project.jobs.submit import InvalidJob, JobSpec
from spiders_project.keys import RedisKeys
from spiders_project.read_model.job_progress import add_top_hosts, details, read_jobs, summary
from spiders_project.redis_access import ErrorKind, RedisUnavailable, SyncRedisCalls, classify
from spiders_project.redis_access.connection import unreachable_message
from spiders_project.redis_access.shards import spider_keys
from spiders_project.scope.seeds import InvalidSeed, check_job_id

ACTIONS = ("submit", "schedule", "unschedule", "list", "show", "pause", "resume", "cancel", "wait")
# Actions that take only a job id (and --json, --timeout for wait).
ON_ONE_JOB = ("show", "pause", "resume", "cancel", "wait")
# Exit status of ``wait``: the job finished, was cancelled, or the timeout came first.
WAIT_EXIT = {FINISHED: 0, CANCELLED: 3, None: 4}
# How many hosts ``show`` lists by queued requests.
TOP_HOSTS = 10
# URLs a schedule may hold: its entry is read by every worker every
# JOBS_SCHEDULE_INTERVAL, so it stays small.
MAX_SCHEDULED_URLS = 1000
# Exit status of a refused job (bad id, URL, regex, limit or cron), as for a bad setting.
REFUSED = 2


class Command(RedisCommand, ScrapyCommand):
    """Operator's jobs; needs only Redis, never starts a crawl."""

    def syntax(self) -> str:
        return (
            "submit|schedule|unschedule|list|show|pause|resume|cancel|wait ID [URL...] "
            "[--cron EXPR] [--max-pages N] [--max-depth N] [--allow RE]... [--deny RE]... "
            "[--priority P] [--timeout S] [--spider NAME] [--json]"
        )

    def short_desc(self) -> str:
        return "Submit, schedule, watch, pause, resume, cancel or wait for crawl jobs"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        self.add_spider_option(parser, "spider whose jobs to use")
        parser.add_argument("--cron", metavar="EXPR", help='schedule: "min hour day month weekday"')
        parser.add_argument("--max-pages", type=int, metavar="N", help="pages for the whole job")
        parser.add_argument("--max-depth", type=int, metavar="N", help="depth from each seed")
        parser.add_argument(
            "--allow", action="append", default=[], metavar="RE", help="URLs must match one"
        )
        parser.add_argument(
            "--deny", action="append", default=[], metavar="RE", help="URLs must match none"
        )
        parser.add_argument("--priority", type=int, default=0, metavar="P", help="seed priority")
        parser.add_argument("--json", action="store_true", help="print one JSON object")
        parser.add_argument(
            "--timeout", type=float, metavar="S", help="wait: give up after S seconds (exit 4)"
        )

    def process_options(self, args: list[str], opts: argparse.Namespace) -> None:
        super().process_options(args, opts)
        if not args or args[0] not in ACTIONS:
            raise UsageError(f"expected one action: {', '.join(ACTIONS)}")
        if args[0] == "list":
            if len(args) > 1:
                raise UsageError("list takes no argument", print_help=False)
            self._job = ""
            return
        if len(args) < 2:
            raise UsageError(f"{args[0]} needs a job ID", print_help=False)
        action, job, urls = args[0], args[1], args[2:]
        if opts.timeout is not None and (action != "wait" or opts.timeout < 0):
            raise UsageError("--timeout is for wait, in seconds >= 0", print_help=False)
        if action in ON_ONE_JOB:
            if urls:
                raise UsageError(f"{action} takes only the job ID", print_help=False)
            try:
                self._job = check_job_id(job)
            except InvalidSeed as exc:
                print(f"ERROR: {exc}", file=sys.stderr)
                raise SystemExit(REFUSED) from None
            return
        if action == "unschedule":
            given = opts.cron or opts.max_pages or opts.max_depth or opts.allow or opts.deny
            if urls or given or opts.priority:
                raise UsageError("unschedule takes only the job ID", print_help=False)
        elif (opts.cron is not None) != (action == "schedule"):
            raise UsageError("--cron is for schedule, which needs it", print_help=False)
        try:
            if action == "unschedule":
                self._job = check_job_id(job)
                return
            self._spec = JobSpec(
                job,
                tuple(urls),
                max_pages=opts.max_pages,
                max_depth=opts.max_depth,
                allow=tuple(opts.allow),
                deny=tuple(opts.deny),
                priority=opts.priority,
            ).check()
            self._job = job
            if action == "schedule":
                check_cron(opts.cron)
                if len(urls) > MAX_SCHEDULED_URLS:
                    raise InvalidJob(f"at most {MAX_SCHEDULED_URLS} URLs a schedule")
        except (InvalidSeed, InvalidJob, InvalidSchedule) as exc:
            print(f"ERROR: {exc}", file=sys.stderr)
            raise SystemExit(REFUSED) from None

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        """One action, sent once: any failure is one line and exit status 1."""
        assert self.settings is not None
        with self.config_errors():
            keys = spider_keys(self.settings, opts.spider, self.seeds_key(opts.spider))
            config = JobsConfig.from_settings(self.settings)
            calls = self.redis_calls()
        try:
            if args[0] in ("pause", "resume", "cancel", "wait"):
                self._control(calls, keys, config, args[0], opts)
                return
            if args[0] in ("list", "show"):
                jobs = read_jobs(calls, keys)
                if args[0] == "show":
                    add_top_hosts(calls, keys, jobs, self._job, TOP_HOSTS)
            elif args[0] == "submit":
                out = self._submit(calls, keys, config)
            elif args[0] == "schedule":
                out = self._schedule(calls, keys, opts.cron)
            else:
                out = self._unschedule(calls, keys, self._job)
        except RedisUnavailable as exc:
            self.fail(f"{args[0]} {self._job}: {self._unavailable(exc.cause)}")
            return
        except redis.RedisError as exc:
            self.fail(redis_error(exc))
            return
        finally:
            calls.client.close()
        if args[0] == "list":
            for progress in jobs:
                print(json.dumps(progress.as_dict()) if opts.json else summary(progress))
            return
        if args[0] == "show":
            found = [p for p in jobs if p.id == self._job]
            if not found:
                self.fail(f"no job {self._job} in {keys.jobs}")
                return
            print(json.dumps(found[0].as_dict()) if opts.json else details(found[0]))
            return
        line = out.pop("line")
        print(json.dumps(out) if opts.json else line)

    def _unavailable(self, cause: BaseException) -> str:
        assert self.settings is not None
        if classify(cause) is ErrorKind.CONNECTION:
            return unreachable_message(self.settings, cause)
        return f"Redis refused it ({type(cause).__name__}: {cause}); nothing was written"

    def _control(
        self,
        calls: SyncRedisCalls,
        keys: RedisKeys,
        config: JobsConfig,
        action: str,
        opts: argparse.Namespace,
    ) -> None:
        """pause, resume, cancel or wait: one line (or JSON object) and an exit status."""
        job = self._job
        if action == "wait":

            def seen(state: str) -> None:
                if not opts.json:
                    print(f"Job {job} is {state}", flush=True)

            try:
                ended = wait_for_end(calls, keys, job, opts.timeout, seen=seen)
            except JobStateError as exc:
                self.fail(str(exc))
                return
            out: dict[str, Any] = {"id": job, "state": ended, "timed_out": ended is None}
            line = f"Job {job} {ended}" if ended else f"Job {job}: no end within {opts.timeout:g} s"
            print(json.dumps(out) if opts.json else line)
            self.exitcode = WAIT_EXIT[ended]
            return
        to = {"pause": PAUSED, "resume": RUNNING, "cancel": CANCELLED}[action]
        try:
            progress = change_state(calls, keys, job, to, why=action, events_max=config.events_max)
        except JobStateError as exc:
            self.fail(str(exc))
            return
        out = {"id": job, "state": to}
        if action == "pause":
            line = (
                f"Job {job} paused: no new download of it starts from 2 s on; "
                f"{progress.queued} queued stay queued, {progress.in_flight} in flight finish"
            )
        elif action == "resume":
            out["restored"] = restored = restore_held(calls, keys, job)
            line = f"Job {job} resumed: {restored} requests set aside went back to their queues"
        else:
            purged = purge_job(calls, keys, job)
            out["purged"] = sum(purged.values())
            out.update(purged)
            out["in_flight"] = progress.in_flight
            out["leased"] = progress.leased
            line = (
                f"Job {job} cancelled: {out['purged']} requests purged ({purged['queued']} queued, "
                f"{purged['backing_off']} backing off, {purged['held']} set aside by a pause); "
                f"{progress.in_flight} in flight finish, their items kept, their links dropped"
            )
        print(json.dumps(out) if opts.json else line)

    def _submit(self, calls: SyncRedisCalls, keys: RedisKeys, config: JobsConfig) -> dict[str, Any]:
        spec = self._spec
        run, started = submit_run(calls, keys, spec, events_max=config.events_max)
        line = (
            f"Job {spec.job} submitted (run {run}): {_seeds(len(spec.urls))} in {keys.start_urls}"
            + (f", at most {spec.max_pages} pages" if spec.max_pages is not None else "")
        )
        return {
            "line": line,
            "id": spec.job,
            "run": run,
            "state": "running",
            "started_at": _iso(started),
            "seeds": len(spec.urls),
            "key": keys.start_urls,
        }

    def _schedule(self, calls: SyncRedisCalls, keys: RedisKeys, cron: str) -> dict[str, Any]:
        seconds, micros = calls.command("TIME", retry=False, writes=False)
        now = int(seconds) * 1000 + int(micros) // 1000
        schedule = Schedule(cron, self._spec, now)
        calls.command("HSET", keys.job_schedules, self._spec.job, schedule.to_json(), retry=False)
        upcoming = next_tick(cron, now)
        line = (
            f"Job {self._spec.job} scheduled ({cron!r}, UTC): next run at {_iso(upcoming)}, "
            f"{_seeds(len(self._spec.urls))}; in {keys.job_schedules}"
        )
        return {
            "line": line,
            "id": self._spec.job,
            "cron": cron,
            "next_run": _iso(upcoming),
            "seeds": len(self._spec.urls),
            "key": keys.job_schedules,
        }

    def _unschedule(self, calls: SyncRedisCalls, keys: RedisKeys, job: str) -> dict[str, Any]:
        removed = int(calls.command("HDEL", keys.job_schedules, job, retry=False)) == 1
        line = f"Job {job} unscheduled" if removed else f"Job {job} had no schedule"
        return {"line": line, "id": job, "removed": removed}


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="seconds")


def _seeds(n: int) -> str:
    return f"{n} seed" if n == 1 else f"{n} seeds"
