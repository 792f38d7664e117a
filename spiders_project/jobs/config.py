"""The jobs' settings (``JOBS_*``), read once and checked."""

from __future__ import annotations

from dataclasses import dataclass

from scrapy.settings import BaseSettings

from spiders_project.config import SettingsReader


@dataclass(frozen=True)
class JobsConfig:
    """``JOBS_SCHEDULES_ENABLED``, ``JOBS_SCHEDULE_INTERVAL``, ``JOBS_EVENTS_MAX``,
    ``JOBS_SCHEDULE_TEST_CLOCK``."""

    schedules_enabled: bool  # off: this worker runs no schedule (the others still do)
    schedule_interval: float  # seconds between looks at the schedules
    events_max: int  # the events stream is trimmed to about this many entries
    # Tests only: a file holding the time (ms) the schedules run at, read at
    # every look, so a test steps the clock of running workers; "": Redis' clock.
    test_clock: str

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> JobsConfig:
        read = SettingsReader(settings)
        return cls(
            schedules_enabled=read.getbool("JOBS_SCHEDULES_ENABLED"),
            schedule_interval=read.getfloat("JOBS_SCHEDULE_INTERVAL", above=0),
            events_max=read.getint("JOBS_EVENTS_MAX", minimum=1),
            test_clock=read.getstr("JOBS_SCHEDULE_TEST_CLOCK"),
        )
