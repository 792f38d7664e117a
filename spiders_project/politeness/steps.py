"""Politeness's frontier steps: a retry's wait, and the group a request queues under."""

from __future__ import annotations

from scrapy import Request
from scrapy.crawler import Crawler

from spiders_project.meta import RETRY_WAIT
from spiders_project.politeness.delays import HostPoliteness
from spiders_project.runtime.steps import Enqueue


class RetryWaitStep:
    """A retry's backoff (``retries.py``) becomes the enqueue's wait.

    The frontier keeps the request in its host's later-set for that many
    milliseconds (``runtime/lua/enqueue.lua``): no worker fetches it earlier
    and it holds no download slot meanwhile. The meta key is popped, so it is
    never stored with the request.
    """

    def admit(self, request: Request, entry: Enqueue) -> Request:
        entry.wait_ms = int(request.meta.pop(RETRY_WAIT, 0) or 0)
        return request


class PolitenessKeyStep:
    """Names the politeness group of each URL (``POLITENESS_KEY``) and its delay.

    The frontier keeps one queue per group and spaces each group's turns by
    its delay in the lease script, so N workers together respect it: the
    group is the queue a request is stored in, and the delay travels with
    every lease call (``delays.py``).
    """

    def __init__(self, politeness: HostPoliteness) -> None:
        # Bound methods taken once: the scheduler calls them per request and
        # per lease candidate.
        self.group_of = politeness.key_of
        self.delay_ms = politeness.delay_ms

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> PolitenessKeyStep:
        return cls(HostPoliteness.of(crawler))
