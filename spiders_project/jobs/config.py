"""The jobs' settings (``JOBS_*``), read once and checked."""

from __future__ import annotations

from dataclasses import dataclass

from scrapy.settings import BaseSettings

from spiders_project.config import SettingsReader

# The longest JOBS_STATE_INTERVAL: a pause must reach every worker within 2 s.
MAX_STATE_INTERVAL = 1.5


@dataclass(frozen=True)
class JobsConfig:
    """``JOBS_SCHEDULES_ENABLED``, ``JOBS_SCHEDULE_INTERVAL``, ``JOBS_EVENTS_MAX``,
    ``JOBS_SCHEDULE_TEST_CLOCK``, ``JOBS_STATE_INTERVAL``, ``JOB_FINISH_GRACE``,
    ``JOB_STALL_AFTER``."""

    schedules_enabled: bool  # off: this worker runs no schedule (the others still do)
    schedule_interval: float  # seconds between looks at the schedules
    events_max: int  # the events stream is trimmed to about this many entries
    # Tests only: a file holding the time (ms) the schedules run at, read at
    # every look, so a test steps the clock of running workers; "": Redis' clock.
    test_clock: str
    state_interval: float  # seconds between reads of the paused and cancelled jobs
    finish_grace: float  # seconds with nothing to do before a job is finished
    # Seconds between two looks at every job's counts (finish detection): a
    # third of the grace, within the state interval and 5 s.
    finish_look: float
    stall_after: float  # seconds a running job with work queued fetches nothing: stalled

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> JobsConfig:
        read = SettingsReader(settings)
        interval = read.getfloat("JOBS_STATE_INTERVAL", minimum=0.05)
        read.check(
            interval <= MAX_STATE_INTERVAL,
            "JOBS_STATE_INTERVAL",
            f"at most {MAX_STATE_INTERVAL:g} s: a pause must reach every worker within 2 s",
        )
        grace = read.getfloat("JOB_FINISH_GRACE", minimum=0)
        return cls(
            schedules_enabled=read.getbool("JOBS_SCHEDULES_ENABLED"),
            schedule_interval=read.getfloat("JOBS_SCHEDULE_INTERVAL", above=0),
            events_max=read.getint("JOBS_EVENTS_MAX", minimum=1),
            test_clock=read.getstr("JOBS_SCHEDULE_TEST_CLOCK"),
            state_interval=interval,
            finish_grace=grace,
            finish_look=min(5.0, max(interval, grace / 3)),
            stall_after=read.getfloat("JOB_STALL_AFTER", above=0),
        )
