"""The delay of each host: configured, overridden per host, or asked for by the site.

The frontier, not each worker's downloader, spaces the fetches of one host:
the lease script hands out one request of a delayed host per turn and moves
the host's next turn forward, so N workers together respect the delay.
"""

from __future__ import annotations

from scrapy.crawler import Crawler
from scrapy.settings import BaseSettings

from spiders_project.config import SettingsReader
from spiders_project.crawl.hosts import host_key
from spiders_project.plumbing.wiring import shared
from spiders_project.politeness.groups import MODES, PolitenessKey
from spiders_project.politeness.steered import SteeredHosts


class HostPoliteness:
    """Delay per host: the per-host override if any, else the default.

    "Host" here is the politeness group ``key_of`` names (``POLITENESS_KEY``:
    the host by default, else its registrable domain or its IP address).

    Two places use it. The lease script spaces a host's turns by the delay, so
    workers do not lease what they cannot send yet; the dispatch gate (the
    last downloader middleware) grants each send at least the delay plus a
    small guard after the previous one, which is what the site sees.
    """

    def __init__(
        self,
        default: float,
        overrides: dict[str, float],
        guard: float,
        groups: PolitenessKey | None = None,
        steered: SteeredHosts | None = None,
    ) -> None:
        self.groups = groups or PolitenessKey()
        # The operator's delays set at runtime (scrapy frontier host --delay).
        self.steered = steered
        self.default_ms = round(default * 1000)
        # A host named in settings applies to its whole group (POLITENESS_KEY).
        self.overrides_ms = {
            self.groups.of_host(host_key(h)): round(d * 1000) for h, d in overrides.items()
        }
        self.guard_ms = round(guard * 1000)
        # Delays sites asked for (robots.txt Crawl-delay), as this worker saw them.
        self.asked_ms: dict[str, int] = {}

    @classmethod
    def of(cls, crawler: Crawler) -> HostPoliteness:
        """The instance shared by the scheduler and the middlewares of a crawler."""
        return shared(
            crawler, cls, lambda: cls.from_settings(crawler.settings, SteeredHosts.of(crawler))
        )

    @classmethod
    def from_settings(
        cls, settings: BaseSettings, steered: SteeredHosts | None = None
    ) -> HostPoliteness:
        read = SettingsReader(settings)
        overrides = read.getdict("HOST_DOWNLOAD_DELAYS")
        delays: dict[str, float] = {}
        for host, delay in overrides.items():
            try:
                delays[str(host)] = float(delay)
            except (TypeError, ValueError):
                read.fail("HOST_DOWNLOAD_DELAYS", f"the delay of {host!r} is not a number")
            read.check(delays[str(host)] >= 0, "HOST_DOWNLOAD_DELAYS", f"{host!r} is negative")
        return cls(
            read.getfloat("DOWNLOAD_DELAY", minimum=0),
            delays,
            read.getfloat("POLITENESS_GUARD", minimum=0),
            PolitenessKey(read.getstr("POLITENESS_KEY", choices=MODES)),
            steered,
        )

    def key_of(self, url: str) -> str:
        """The politeness group of ``url`` (its host, domain or IP: ``POLITENESS_KEY``).

        The frontier queues, delays, caps and pauses by this name.
        """
        return self.groups.of_url(url)

    def delay_ms(self, host: str) -> int:
        """The delay of ``host``: the operator's at runtime, else the configured
        one (the site may ask for more)."""
        if self.steered is not None:
            steered = self.steered.delay_ms(host)
            if steered is not None:
                return steered
        return self.overrides_ms.get(host, self.default_ms)

    def site_asked(self, host: str, delay_ms: int) -> None:
        """Record a delay the site asked for (it is also stored in Redis)."""
        self.asked_ms[host] = delay_ms

    def gate_ms(self, host: str) -> int:
        """The spacing the dispatch gate enforces: the delay plus the guard."""
        delay = max(self.delay_ms(host), self.asked_ms.get(host, 0))
        return delay + self.guard_ms if delay > 0 else 0
