"""The frontier's settings (scheduler, seeds, write batcher), read once and checked."""

from __future__ import annotations

from dataclasses import dataclass

from scrapy.settings import BaseSettings

from spiders_project.config import SettingsReader
from spiders_project.keys import HTTP, RENDER

# WORKER_ROLE -> the queues such a worker leases from.
ALL = "all"
ROLES = {ALL: (HTTP, RENDER), "http": (HTTP,), "render": (RENDER,)}


@dataclass(frozen=True)
class FrontierConfig:
    """What the scheduler, the seed reader and the write batcher of a worker need."""

    concurrency: int  # CONCURRENT_REQUESTS: leases held at most, with prefetch
    per_host: int  # CONCURRENT_REQUESTS_PER_DOMAIN: one lease call's share of a host
    prefetch: int
    spares: int  # FRONTIER_SPARES: spare leases of capped hosts (frontier/spares.py)
    lease_timeout: float
    close_timeout: float
    flush_interval: float
    empty_poll_interval: float
    seen_cache: int
    persist: bool
    flush_on_start: bool
    seed_batch_size: int
    seed_spread: int
    seed_poll_interval: float
    max_idle_time: float
    role: str = ALL  # WORKER_ROLE: the queues this worker leases from

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> FrontierConfig:
        read = SettingsReader(settings)
        role = read.getstr("WORKER_ROLE", choices=list(ROLES))
        read.check(
            role != "render" or read.getbool("RENDER_ENABLED"),
            "WORKER_ROLE",
            "a render worker needs RENDER_ENABLED=true",
        )
        return cls(
            concurrency=read.getint("CONCURRENT_REQUESTS", minimum=1),
            per_host=read.getint("CONCURRENT_REQUESTS_PER_DOMAIN", minimum=1),
            prefetch=read.getint("FRONTIER_PREFETCH", minimum=0),
            spares=read.getint("FRONTIER_SPARES", minimum=0),
            # 0 would renew leases in a busy loop (every lease_timeout / 3 s).
            lease_timeout=read.getfloat("FRONTIER_LEASE_TIMEOUT", above=0),
            close_timeout=read.getfloat("FRONTIER_CLOSE_TIMEOUT", minimum=0),
            flush_interval=read.getfloat("FRONTIER_FLUSH_INTERVAL", above=0),
            empty_poll_interval=read.getfloat("FRONTIER_EMPTY_POLL_INTERVAL", above=0),
            seen_cache=read.getint("FRONTIER_SEEN_CACHE", minimum=0),
            persist=read.getbool("SCHEDULER_PERSIST"),
            flush_on_start=read.getbool("SCHEDULER_FLUSH_ON_START"),
            seed_batch_size=read.getint("SEED_BATCH_SIZE", minimum=1),
            seed_spread=read.getint("SEED_SPREAD", minimum=1),
            seed_poll_interval=read.getfloat("SEED_POLL_INTERVAL", above=0),
            max_idle_time=read.getfloat("MAX_IDLE_TIME_BEFORE_CLOSE", minimum=0),
            role=role,
        )

    @property
    def lanes(self) -> tuple[str, ...]:
        """The frontier's queues (``keys.LANES``) this worker leases from."""
        return ROLES[self.role]

    @property
    def renew_interval(self) -> float:
        """A live worker renews its leases three times per lease timeout."""
        return self.lease_timeout / 3
