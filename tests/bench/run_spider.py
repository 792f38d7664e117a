"""Run one baseline crawl in this process: ``python -m tests.bench.run_spider plain|stock``.

The worker under test is ``scrapy crawl distributed`` itself; this module runs the
two baselines with the project's settings minus its frontier, middlewares and
extensions. For stock scrapy-redis it also counts the client's round trips (every
command sent alone, every pipeline sent at once) into the stat ``redis/round_trips``,
as the worker does.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from scrapy import signals
from scrapy.crawler import CrawlerProcess
from scrapy.utils.project import get_project_settings

from spiders_project.addon import components
from tests.bench.spiders import PlainSpider, StockRedisSpider

COMMON: dict[str, Any] = {
    # Not the cluster's add-on (it would merge its components back and refuse
    # another scheduler), but its download handlers and spider middlewares, as
    # the baselines have always had them.
    "ADDONS": {},
    "DOWNLOAD_HANDLERS": dict(components.DOWNLOAD_HANDLERS),
    "SPIDER_MIDDLEWARES": dict(components.SPIDER_MIDDLEWARES),
    "EXTENSIONS": {},
    "DOWNLOADER_MIDDLEWARES": {},
    "LOG_LEVEL": "INFO",
}

PLAIN: dict[str, Any] = {
    "SCHEDULER": "scrapy.core.scheduler.Scheduler",
    "DUPEFILTER_CLASS": "scrapy.dupefilters.RFPDupeFilter",
    "ITEM_PIPELINES": {"tests.bench.spiders.JsonItemPipeline": 900},
}

STOCK: dict[str, Any] = {
    "SCHEDULER": "scrapy_redis.scheduler.Scheduler",
    "SCHEDULER_QUEUE_CLASS": "scrapy_redis.queue.PriorityQueue",
    "DUPEFILTER_CLASS": "scrapy_redis.dupefilter.RFPDupeFilter",
    "SCHEDULER_SERIALIZER": "scrapy_redis.picklecompat",
    "SCHEDULER_PERSIST": True,
    "ITEM_PIPELINES": {"scrapy_redis.pipelines.RedisPipeline": 300},
}


class RoundTrips:
    """Counts request/reply exchanges of every synchronous redis-py client."""

    count = 0

    @classmethod
    def install(cls) -> None:
        import redis.client

        command = redis.client.Redis.execute_command
        execute = redis.client.Pipeline.execute

        def counted_command(self: Any, *args: Any, **options: Any) -> Any:
            if not isinstance(self, redis.client.Pipeline):
                cls.count += 1
            return command(self, *args, **options)

        def counted_execute(self: Any, *args: Any, **kwargs: Any) -> Any:
            if self.command_stack:
                cls.count += 1
            return execute(self, *args, **kwargs)

        redis.client.Redis.execute_command = counted_command  # type: ignore[method-assign]
        redis.client.Pipeline.execute = counted_execute  # type: ignore[method-assign]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=("plain", "stock"))
    parser.add_argument("--url", help="the site's root (plain)")
    parser.add_argument("-s", dest="settings", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--stats-file", type=Path, help="write the final stats here as JSON")
    args = parser.parse_args(argv)

    settings = get_project_settings()
    settings.setdict({**COMMON, **(PLAIN if args.kind == "plain" else STOCK)}, priority="cmdline")
    for pair in args.settings:
        name, _, value = pair.partition("=")
        settings.set(name, value, priority="cmdline")
    process = CrawlerProcess(settings)
    if args.kind == "plain":
        crawler = process.create_crawler(PlainSpider)
        kwargs = {"url": args.url}
    else:
        RoundTrips.install()
        crawler = process.create_crawler(StockRedisSpider)
        kwargs = {}

    def closed() -> None:
        # What the benchmark reads instead of parsing the log's stats dump.
        if args.kind == "stock":
            crawler.stats.set_value("redis/round_trips", RoundTrips.count)
        if args.stats_file is not None:
            args.stats_file.write_text(json.dumps(crawler.stats.get_stats(), default=str))

    crawler.signals.connect(closed, signal=signals.spider_closed)
    process.crawl(crawler, **kwargs)
    process.start()
    return 0


if __name__ == "__main__":
    sys.exit(main())
