"""A JSON seed's own limits, applied to everything crawled from it by every worker.

``{"url": ..., "max_pages": 500, "max_depth": 3, "allow": ["/docs/"], "deny": ["\\\\?print="]}``
(``seeds.parse_seed`` checks them) travel in request meta (``seed_scope``):

- :class:`SeedScope`, a spider middleware, copies them from a response to
  the requests its callback yields (a callback need not know about them) and
  drops, with a stat, a link that a regex refuses (``allow``: at least one
  must match; ``deny``: none may) or that is deeper than ``max_depth``
  (Scrapy's ``depth``, 0 at the seed) or whose seed has used its budget;
- :class:`SeedBudget`, a downloader middleware, counts each page against
  ``max_pages`` in Redis (``lua/seed_budget.lua``), so the budget holds
  across all workers. Once it is used up, the seed's requests still queued
  are dropped as workers lease them, and counted (``seeds/over_budget``);
  retries of a page already counted are not counted again.

On a sharded frontier (Redis Cluster) a seed's counter is in the shard its
id hashes to, not in the spider's own slot, which would otherwise take a
call for every budgeted page of the cluster: budgeted seeds spread over the
masters. A budget spans every host its seed reaches (and a ``scope_id``
spans seeds), so it has no host of its own to follow.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

from scrapy import Request
from scrapy.crawler import Crawler
from scrapy.exceptions import IgnoreRequest
from scrapy.http import Response
from scrapy.spidermiddlewares.base import BaseSpiderMiddleware

from spiders_project.crawl.meta import COUNTED, GUARDED, JOB, SCOPE_META
from spiders_project.frontier.context import WorkerRedis
from spiders_project.frontier.outcomes import link_refused, request_refused
from spiders_project.keys.jobs import DEFAULT_JOB
from spiders_project.plumbing.wiring import shared
from spiders_project.redis_access import load_lua

logger = logging.getLogger(__name__)

LUA_DIR = Path(__file__).with_name("lua")
# A seed's page counter outlives its last page by this long (a long crawl's lifetime).
BUDGET_TTL = 30 * 24 * 3600


class SeedBudgets:
    """The seeds this worker knows to have used their budget, shared by both middlewares."""

    def __init__(self) -> None:
        self.spent: set[str] = set()
        self._patterns: dict[tuple[str, str], list[re.Pattern[str]]] = {}

    @classmethod
    def of(cls, crawler: Crawler) -> SeedBudgets:
        return shared(crawler, cls, cls)

    def patterns(self, scope: dict[str, Any], name: str) -> list[re.Pattern[str]]:
        key = (str(scope.get("id")), name)
        found = self._patterns.get(key)
        if found is None:
            found = self._patterns[key] = [re.compile(p) for p in scope.get(name) or ()]
        return found


class SeedScope(BaseSpiderMiddleware):
    """Carries a seed's limits to the links crawled from it and applies them (module docstring).

    It also gives a page's private-network guard mark to its links
    (``scope.networks``) and its crawl job (``meta.JOB``): one layer of
    spider middleware for all three, as each layer costs every request and
    item of every page.

    Ordered after Scrapy's DepthMiddleware (900) on the way out, so links
    have their depth when they get here.
    """

    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        self.budgets = SeedBudgets.of(crawler)

    def get_processed_request(self, request: Request, response: Response | None) -> Request | None:
        if response is None:
            return request
        if response.meta.get(GUARDED):
            # Reached from a public address: its links must stay public (scope.networks).
            request.meta[GUARDED] = True
        job = response.meta.get(JOB)
        if job is not None and JOB not in request.meta:
            # The page's job is its links' job: one short string, no Redis.
            request.meta[JOB] = job
        parent = response.meta.get(SCOPE_META)
        scope = request.meta.get(SCOPE_META)
        if scope is None:
            if not parent:
                return request
            request.meta[SCOPE_META] = scope = parent
        why = self.refusal(request, scope)
        if why is None:
            return request
        assert self.crawler.stats is not None
        self.crawler.stats.inc_value(f"seeds/{why}")
        # Its job counts it refused, once per URL (frontier/refused.py).
        salt = str(request.meta.get(JOB, DEFAULT_JOB)).encode()
        self.crawler.signals.send_catch_log(link_refused, request=request, salt=salt)
        logger.debug("Not following %s: %s of its seed", request.url, why)
        return None

    def refusal(self, request: Request, scope: dict[str, Any]) -> str | None:
        """Why the seed's limits refuse ``request`` (a stat name), or None."""
        if scope.get("id") in self.budgets.spent:
            return "over_budget"
        max_depth = scope.get("max_depth")
        if max_depth is not None and request.meta.get("depth", 0) > max_depth:
            return "too_deep"
        url = request.url
        allow = self.budgets.patterns(scope, "allow")
        if allow and not any(p.search(url) for p in allow):
            return "not_allowed"
        if any(p.search(url) for p in self.budgets.patterns(scope, "deny")):
            return "denied"
        return None


class SeedBudget:
    """Counts each page of a seed with ``max_pages`` in Redis; drops those over budget.

    Before the politeness gate (a dropped request takes no turn of its host).
    """

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.redis = WorkerRedis.of(crawler)
        self.budgets = SeedBudgets.of(crawler)
        self.script = load_lua(LUA_DIR, "seed_budget")

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> SeedBudget:
        return cls(crawler)

    async def process_request(self, request: Request) -> None:
        scope = request.meta.get(SCOPE_META)
        if not scope or not scope.get("max_pages") or request.meta.get(COUNTED):
            return
        seed_id = str(scope.get("id"))
        stats = self.crawler.stats
        assert stats is not None
        if seed_id not in self.budgets.spent:
            budget = self.redis.keys.for_host(seed_id)  # its shard: see the module docstring
            count = int(
                await self.redis.calls_for(budget).script(
                    self.script, [budget.seed_pages(seed_id)], [BUDGET_TTL]
                )
            )
            if count <= int(scope["max_pages"]):
                request.meta[COUNTED] = True
                return
            self.budgets.spent.add(seed_id)
            logger.info(
                "Seed %s reached its max_pages=%d: its remaining requests are dropped",
                seed_id,
                scope["max_pages"],
            )
        stats.inc_value("seeds/over_budget")
        # Leased and not fetched: its job counts it refused (frontier/outcomes.py).
        self.crawler.signals.send_catch_log(request_refused, request=request)
        raise IgnoreRequest(f"seed {seed_id} reached max_pages={scope['max_pages']}")
