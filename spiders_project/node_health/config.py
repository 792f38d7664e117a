"""Node health's settings, read once and checked."""

from __future__ import annotations

from dataclasses import dataclass

from scrapy.settings import BaseSettings

from spiders_project.config import SettingsReader


@dataclass(frozen=True)
class NodeHealthConfig:
    enabled: bool  # NODE_HEALTH_ENABLED
    failures: int  # NODE_FAILURES: failed fetches in a row that call for a verdict
    window: float  # NODE_FAILURE_WINDOW: seconds of failures that call for one
    probe_interval: float  # NODE_PROBE_INTERVAL: seconds between probes once cut off
    settle: float  # STATS_PUBLISH_INTERVAL: how often the others' counters are published
    retry_times: int = 2  # RETRY_TIMES: a request's last attempt is its retry number this

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> NodeHealthConfig:
        read = SettingsReader(settings)
        enabled = read.getbool("NODE_HEALTH_ENABLED")
        read.check(
            not enabled or read.getbool("STATS_PUBLISH_ENABLED"),
            "NODE_HEALTH_ENABLED",
            "needs STATS_PUBLISH_ENABLED: the other workers' published stats are its evidence",
        )
        return cls(
            enabled=enabled,
            failures=read.getint("NODE_FAILURES", minimum=1),
            window=read.getfloat("NODE_FAILURE_WINDOW", above=0),
            probe_interval=read.getfloat("NODE_PROBE_INTERVAL", above=0),
            settle=read.getfloat("STATS_PUBLISH_INTERVAL", above=0),
            retry_times=read.getint("RETRY_TIMES", minimum=0),
        )

    @property
    def undecided_limit(self) -> float:
        """How long a verdict may stay open before fetching resumes anyway: the
        counters it waits for come every ``settle`` seconds while workers live."""
        return max(self.window, 4 * self.settle)
