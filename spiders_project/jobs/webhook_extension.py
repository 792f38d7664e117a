"""Job webhooks in every worker: the Scrapy extension that runs ``webhook_delivery``.

Off (NotConfigured) unless ``JOB_WEBHOOK_URLS`` is set. Each worker is one
consumer of the webhooks' group, so the workers share the events and each is
sent once for the whole cluster, whichever worker reads it; one that stops or
dies leaves what it held pending, and another takes it over.
"""

from __future__ import annotations

import asyncio

from scrapy import signals
from scrapy.crawler import Crawler

from spiders_project.frontier.context import WorkerRedis
from spiders_project.jobs.webhook_delivery import WebhookDelivery
from spiders_project.jobs.webhooks import WebhookConfig
from spiders_project.plumbing.tasks import spawn_loop, stop_tasks


class JobWebhooks:
    """Runs this worker's delivery loop while the spider is open."""

    def __init__(self, delivery: WebhookDelivery) -> None:
        self.delivery = delivery
        self._task: asyncio.Task[None] | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> JobWebhooks:
        config = WebhookConfig.from_settings(crawler.settings)
        assert crawler.stats is not None
        stats = crawler.stats
        redis = WorkerRedis.of(crawler)
        delivery = WebhookDelivery(
            redis.calls, redis.keys, redis.worker, config, lambda name: stats.inc_value(name)
        )
        extension = cls(delivery)
        crawler.signals.connect(extension.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(extension.spider_closed, signal=signals.spider_closed)
        return extension

    def spider_opened(self) -> None:
        if self._task is None:
            self._task = spawn_loop("job webhooks", self.delivery.run())

    async def spider_closed(self) -> None:
        """Stop sending: a try cut short leaves its event pending for another worker."""
        if self._task is not None:
            await stop_tasks([self._task])
            self._task = None
