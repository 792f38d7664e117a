"""Rendering's frontier step: a request that will render goes to the render queue."""

from __future__ import annotations

from scrapy import Request
from scrapy.crawler import Crawler

from spiders_project.frontier.steps import Enqueue
from spiders_project.rendering.queue_choice import RenderRouting


class RenderRouteStep:
    """Sends a request that will render to its host's render queue (``queue_choice.py``).

    A ``route`` hook, after the dedup pre-filter and before the request is
    encoded: auto mode may mark the request ``"playwright": true``, and that
    mark must be in what is stored, for the render worker that leases it.
    """

    def __init__(self, routing: RenderRouting) -> None:
        self.routing = routing

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RenderRouteStep:
        return cls(RenderRouting.of(crawler))

    def route(self, request: Request, entry: Enqueue) -> None:
        entry.lane = self.routing.lane_of(request)
