"""Which of the frontier's queues a request goes to: the render queue or the HTTP one.

A request that will render is queued apart (``keys.RENDER``), so render
workers (``WORKER_ROLE=render``) can lease only those and HTTP workers never
lease them. The decision is the one ``RenderMiddleware`` makes at download
time (``RenderRules.decide`` on the URL and the request's JSON meta), made
once more at enqueue time: both read the same settings, so a request is
rendered by the worker that leased it from the render queue. With
``RENDER_ENABLED`` off nothing renders, and everything goes to the HTTP queue.
With ``RENDER_MODE=auto`` a request of a site section that learned it needs
JavaScript (:mod:`.auto`) goes to the render queue too, marked
``"playwright": true`` so the worker that leases it renders it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from scrapy import Request
from scrapy.crawler import Crawler
from scrapy.settings import BaseSettings

from spiders_project.crawl.meta import RENDER as RENDER_META
from spiders_project.keys import HTTP, RENDER
from spiders_project.rendering.auto import AutoRender
from spiders_project.rendering.config import RenderConfig
from spiders_project.rendering.rules import RenderRules


@dataclass(frozen=True)
class RenderRouting:
    enabled: bool
    rules: RenderRules
    auto: AutoRender | None = None  # a worker's, in RENDER_MODE=auto

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> RenderRouting:
        """Rules only: for commands (``deadletters requeue``), which learn nothing."""
        config = RenderConfig.from_settings(settings)
        return cls(config.enabled, RenderRules(config.rules))

    @classmethod
    def of(cls, crawler: Crawler) -> RenderRouting:
        """A worker's: with what auto mode learned, when it is on."""
        config = RenderConfig.from_settings(crawler.settings)
        auto = AutoRender.of(crawler)
        return cls(config.enabled, RenderRules(config.rules), auto if auto.enabled else None)

    def lane_of(self, request: Request) -> str:
        """``RENDER`` for a request that will render, else ``HTTP``; a request
        sent there by what auto mode learned is marked to render."""
        lane = self.lane_for(request.url, request.meta)
        if (
            lane == HTTP
            and self.auto is not None
            and request.meta.get(RENDER_META) is not False
            and self.auto.renders_directly(request.url)
        ):
            request.meta["playwright"] = True
            return RENDER
        return lane

    def lane_for(self, url: str, meta: Mapping[str, Any]) -> str:
        """``lane_of`` for a request known by its URL and JSON meta (a dead letter)."""
        if self.enabled and self.rules.decide(url, meta)[0]:
            return RENDER
        return HTTP
