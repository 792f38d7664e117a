"""The downloader middleware that stops a request of a job paused or cancelled on its way out."""

from __future__ import annotations

from scrapy import Request
from scrapy.crawler import Crawler
from scrapy.exceptions import IgnoreRequest

from spiders_project.crawl.meta import job_of
from spiders_project.frontier.outcomes import request_dropped, request_held
from spiders_project.jobs.state_loop import JobWatch
from spiders_project.jobs.states import CANCELLED, PAUSED

# Stats of JobGate: requests stopped right before their download.
GATE_HELD = "jobs/paused/held_at_download"
GATE_DROPPED = "jobs/cancelled/dropped_at_download"


class JobGate:
    """The last check before a download: a request of a job paused or cancelled
    meanwhile does not start.

    A request passes ``pause_step.JobStep`` when the engine takes it, then may
    wait for its host's turn (``HostGateMiddleware``, just before this one): a
    pause that comes during that wait is caught here. The request is not
    fetched; a paused job's lease goes back to its queue
    (``outcomes.request_held``), a cancelled job's counts purged
    (``outcomes.request_dropped``). The host's turn it took is lost: one turn
    per request that was on its way when the pause came.
    """

    def __init__(self, crawler: Crawler) -> None:
        assert crawler.stats is not None
        self.crawler = crawler
        self.stats = crawler.stats
        self.watch = JobWatch.of(crawler)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> JobGate:
        return cls(crawler)

    def process_request(self, request: Request) -> None:
        state = self.watch.state_of(request)
        if state == PAUSED:
            self.stats.inc_value(GATE_HELD)
            self.crawler.signals.send_catch_log(request_held, request=request)
            raise IgnoreRequest(f"job {job_of(request.meta)} is paused")
        if state == CANCELLED:
            self.stats.inc_value(GATE_DROPPED)
            self.crawler.signals.send_catch_log(request_dropped, request=request)
            raise IgnoreRequest(f"job {job_of(request.meta)} is cancelled")
