"""Which of the frontier's queues a request goes to: the render queue or the HTTP one.

A request that will render is queued apart (``keys.RENDER``), so render
workers (``WORKER_ROLE=render``) can lease only those and HTTP workers never
lease them. The decision is the one ``RenderMiddleware`` makes at download
time (``RenderRules.decide`` on the URL and the request's JSON meta), made
once more at enqueue time: both read the same settings, so a request is
rendered by the worker that leased it from the render queue. With
``RENDER_ENABLED`` off nothing renders, and everything goes to the HTTP queue.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from scrapy import Request
from scrapy.settings import BaseSettings

from spiders_project.keys import HTTP, RENDER
from spiders_project.rendering.config import RenderConfig
from spiders_project.rendering.rules import RenderRules


@dataclass(frozen=True)
class RenderRouting:
    enabled: bool
    rules: RenderRules

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> RenderRouting:
        config = RenderConfig.from_settings(settings)
        return cls(config.enabled, RenderRules(config.rules))

    def lane_of(self, request: Request) -> str:
        """``RENDER`` for a request that will render, else ``HTTP``."""
        return self.lane_for(request.url, request.meta)

    def lane_for(self, url: str, meta: Mapping[str, Any]) -> str:
        """``lane_of`` for a request known by its URL and JSON meta (a dead letter)."""
        if self.enabled and self.rules.decide(url, meta)[0]:
            return RENDER
        return HTTP
