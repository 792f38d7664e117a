"""The revisit settings, read once and checked: ``RECRAWL_AFTER``, ``RECRAWL_ADAPTIVE``
and its rates and bounds, ``RECRAWL_LINKS``, ``PAGES_ENABLED`` and the revisit
scheduler's pace.

Workers read it (whether to write page-state entries) and so does the
db_writer (each URL's next interval and due time, through
``recrawl.revisit_rules``, and the revisit scheduler's pace). Settings only:
the rules that use them are in ``revisit_rules``.
"""

from __future__ import annotations

from dataclasses import dataclass

from scrapy.settings import BaseSettings

from spiders_project.config import SettingsReader


@dataclass(frozen=True)
class RecrawlConfig:
    """The revisit settings; ``recrawl.revisit_rules`` applies them.

    ``after`` is RECRAWL_AFTER (seconds; 0: never again): the interval of
    every URL, or with ``adaptive`` the first one, then moved by ``dec_rate``
    and ``inc_rate`` within [``min_interval``, ``max_interval``]
    (``revisit_rules.next_interval``).
    """

    after: float = 0.0
    adaptive: bool = False
    dec_rate: float = 0.2
    inc_rate: float = 0.4
    min_interval: float = 60.0
    max_interval: float = 30 * 86400.0
    pages: bool = False  # PAGES_ENABLED: workers write a page-state entry per fetch
    links: bool = False  # RECRAWL_LINKS: a link found again re-enqueues a URL seen long ago
    schedule_every: float = 1.0  # seconds between the db_writer's looks for due rows
    schedule_batch: int = 500  # due rows pushed back per look

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> RecrawlConfig:
        read = SettingsReader(settings)
        after = read.getfloat("RECRAWL_AFTER", minimum=0)
        adaptive = read.getbool("RECRAWL_ADAPTIVE")
        dec_rate = read.getfloat("RECRAWL_DEC_RATE", minimum=0)
        read.check(dec_rate < 1, "RECRAWL_DEC_RATE", "must be less than 1")
        inc_rate = read.getfloat("RECRAWL_INC_RATE", minimum=0)
        low = read.getfloat("RECRAWL_MIN_INTERVAL", above=0)
        high = read.getfloat("RECRAWL_MAX_INTERVAL", minimum=low)
        if adaptive:
            read.check(after > 0, "RECRAWL_ADAPTIVE", "needs RECRAWL_AFTER (the first interval)")
        return cls(
            after=after,
            adaptive=adaptive,
            dec_rate=dec_rate,
            inc_rate=inc_rate,
            min_interval=low,
            max_interval=high,
            pages=read.getbool("PAGES_ENABLED") or after > 0,
            links=read.getbool("RECRAWL_LINKS"),
            schedule_every=read.getfloat("RECRAWL_SCHEDULE_EVERY", above=0),
            schedule_batch=read.getint("RECRAWL_SCHEDULE_BATCH", minimum=1),
        )

    @property
    def revisits(self) -> bool:
        """Whether URLs are revisited when due (RECRAWL_AFTER set)."""
        return self.after > 0
