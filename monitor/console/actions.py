"""What an operator does from the console, through the functions the commands call.

The one console module that imports feature packages (jobs, politeness,
dead_letters, rendering): tests/unit/test_layers.py allows it this module
alone, so the rest of the console stays a reader of the read model. Every
action goes through the operator's own Redis connection (``CONSOLE_REDIS_URL``,
the ``crawler-operator`` user); the monitor's connection stays read-only.

- jobs: ``jobs.control`` as ``scrapy jobs`` (pause; resume, then the requests
  a pause set aside go back; cancel, then the job's queued requests are
  purged; submit), each state change's event carrying ``"by": <user>``;
- hosts: ``politeness.steered.steer_host`` as ``scrapy frontier host``;
- dead letters: ``dead_letters.requeue`` as ``scrapy deadletters``.

Blocking, as the commands are: the application runs each in a thread. Each
action is logged with its user; a refusal (a job's state, a bad value) is
:class:`ActionRefused`, whose text the operator reads.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from scrapy.settings import BaseSettings

from spiders_project.config import SettingsReader
from spiders_project.dead_letters.config import DeadLettersConfig
from spiders_project.dead_letters.requeue import purge, requeue
from spiders_project.frontier.codec.values import ValueCodec
from spiders_project.jobs.config import JobsConfig
from spiders_project.jobs.control import (
    change_state,
    purge_job,
    restore_held,
    submit_run,
)
from spiders_project.jobs.states import CANCELLED, PAUSED, RUNNING, JobStateError
from spiders_project.jobs.submit import InvalidJob, JobSpec
from spiders_project.keys import RedisKeys
from spiders_project.politeness.delays import HostPoliteness
from spiders_project.politeness.steered import steer_host
from spiders_project.read_model.host_steering import InvalidSteering, check_cap, check_delay
from spiders_project.redis_access import SyncRedisCalls
from spiders_project.rendering.queue_choice import RenderRouting

logger = logging.getLogger("monitor.console")

# steer_record.lua's words: keep a field as it is, or clear the override.
KEEP, DEFAULT = "", "default"
# The job actions a row's buttons send, and the state each takes a job to.
JOB_STATES = {"pause": PAUSED, "resume": RUNNING, "cancel": CANCELLED}


class ActionRefused(ValueError):
    """An action the crawl's state or its values do not allow; its text says why."""


@dataclass(frozen=True)
class HostDefaults:
    """What a host gets without an operator's override, and how URLs name hosts."""

    politeness: HostPoliteness
    cap: int  # CONCURRENT_REQUESTS_PER_DOMAIN

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> HostDefaults:
        cap = SettingsReader(settings).getint("CONCURRENT_REQUESTS_PER_DOMAIN", minimum=1)
        return cls(HostPoliteness.from_settings(settings), cap)

    def delay_ms(self, host: str) -> int:
        return self.politeness.delay_ms(host)

    def host_of(self, url: str) -> str:
        """The name the frontier queues ``url`` under (``POLITENESS_KEY``)."""
        return self.politeness.key_of(url)


def steer_value(raw: str, check: Callable[[str], object], name: str) -> str:
    """A delay or cap field as steer_record.lua takes it: "" keeps, "default" clears."""
    raw = raw.strip()
    if raw in (KEEP, DEFAULT):
        return raw
    try:
        return repr(check(raw))
    except InvalidSteering as exc:
        raise ActionRefused(str(exc).replace("--", "")) from None
    except ValueError:
        raise ActionRefused(f"{name} takes a number or 'default', not {raw[:40]!r}") from None


class Actions:
    """The operator's hand, on ``calls`` (the operator's connection)."""

    def __init__(
        self,
        calls: SyncRedisCalls,
        keys_of: Callable[[str], RedisKeys],
        *,
        events_max: int,
        retry_priority_adjust: int,
        values: ValueCodec,
        defaults: HostDefaults,
        routing: RenderRouting,
    ) -> None:
        self.calls = calls
        self.keys_of = keys_of
        self.events_max = events_max
        self.retry_priority_adjust = retry_priority_adjust
        self.values = values
        self.defaults = defaults
        self.routing = routing

    @classmethod
    def from_settings(
        cls, settings: BaseSettings, calls: SyncRedisCalls, keys_of: Callable[[str], RedisKeys]
    ) -> Actions:
        """Raises ConfigError for a bad setting of the features it uses."""
        return cls(
            calls,
            keys_of,
            events_max=JobsConfig.from_settings(settings).events_max,
            retry_priority_adjust=DeadLettersConfig.from_settings(settings).retry_priority_adjust,
            values=ValueCodec.from_settings(settings),
            defaults=HostDefaults.from_settings(settings),
            routing=RenderRouting.from_settings(settings),
        )

    def job(self, spider: str, job: str, action: str, by: str) -> str:
        """Pause, resume or cancel ``job`` as ``scrapy jobs`` does; what happened."""
        keys = self.keys_of(spider)
        try:
            progress = change_state(
                self.calls,
                keys,
                job,
                JOB_STATES[action],
                why=action,
                events_max=self.events_max,
                by=by,
            )
        except JobStateError as exc:
            raise ActionRefused(str(exc)) from None
        if action == "pause":
            done = f"Job {job} paused: {progress.queued} queued stay queued"
        elif action == "resume":
            restored = restore_held(self.calls, keys, job)
            done = f"Job {job} resumed: {restored} requests set aside went back to their queues"
        else:
            purged = sum(purge_job(self.calls, keys, job).values())
            done = f"Job {job} cancelled: {purged} requests purged"
        logger.info("console: %s: %s (spider %s)", by, done, spider)
        return done

    def submit(self, spider: str, job: str, urls: list[str], max_pages: int | None, by: str) -> str:
        try:
            spec = JobSpec(job, tuple(urls), max_pages=max_pages).check()
        except InvalidJob as exc:
            raise ActionRefused(str(exc)) from None
        run, _ = submit_run(
            self.calls, self.keys_of(spider), spec, events_max=self.events_max, by=by
        )
        done = f"Job {job} submitted (run {run}): {len(urls)} seeds"
        logger.info("console: %s: %s (spider %s)", by, done, spider)
        return done

    def steer(
        self,
        spider: str,
        host: str,
        *,
        delay: str = KEEP,
        cap: str = KEEP,
        blocked: bool | None = None,
        purge: bool = False,
        by: str,
    ) -> str:
        """Apply, Block, Unblock or Purge, as ``scrapy frontier host`` does."""
        delay = steer_value(delay, lambda v: check_delay(float(v)), "delay")
        cap = steer_value(cap, lambda v: check_cap(int(v)), "cap")
        out = steer_host(
            self.calls,
            self.keys_of(spider),
            host,
            delay=delay,
            cap=cap,
            blocked=blocked,
            purge=purge,
        )
        what = []
        if delay or cap:
            what.append(f"delay {delay or 'kept'}, cap {cap or 'kept'}")
        if blocked is not None:
            what.append("blocked" if blocked else "unblocked")
        if purge:
            what.append(f"{out['purged']} requests purged")
        done = f"Host {host}: " + "; ".join(what or ["nothing to change"])
        logger.info("console: %s: %s (spider %s)", by, done, spider)
        return done

    def requeue_dead(self, spider: str, limit: int | None, by: str) -> str:
        """The oldest ``limit`` dead letters (None: all there are now) back in the frontier."""
        keys = self.keys_of(spider)
        if limit is None:
            limit = int(self.calls.command("LLEN", keys.dead, retry=False, writes=False))
        result = self.calls.call(
            "requeue dead letters",
            lambda: requeue(
                self.calls.client,
                keys,
                limit,
                retry_priority_adjust=self.retry_priority_adjust,
                values=self.values,
                group_of=self.defaults.host_of,
                lane_of=self.routing.lane_for,
            ),
            retry=False,
        )
        done = f"Requeued {result.requeued} dead letters"
        if result.rejected:
            done += f"; {result.rejected} entries that were not dead letters set aside"
        logger.info("console: %s: %s (spider %s)", by, done, spider)
        return done

    def purge_dead(self, spider: str, by: str) -> str:
        keys = self.keys_of(spider)
        total = self.calls.call(
            "purge dead letters", lambda: purge(self.calls.client, keys), retry=False
        )
        done = f"Purged {total} dead letters"
        logger.info("console: %s: %s (spider %s)", by, done, spider)
        return done
