"""The frontier step that keeps a paused or cancelled job's requests, held here, unfetched."""

from __future__ import annotations

from scrapy import Request
from scrapy.crawler import Crawler
from scrapy.statscollectors import StatsCollector

from spiders_project.frontier.steps import HOLD, Hold
from spiders_project.jobs.state_loop import JobWatch
from spiders_project.jobs.states import CANCELLED, PAUSED

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
        state = self.watch.state_of(request)
        if state == PAUSED:
            self.stats.inc_value(HELD_BACK)
            return HOLD
        if state == CANCELLED:
            self.stats.inc_value(DROPPED)
            return None
        return request
