"""scrapy-redis parts that would not work here refuse loudly, naming what to use instead."""

from __future__ import annotations

import pytest
import redis.asyncio
from scrapy.settings import Settings

from spiders_project.config import load_settings
from spiders_project.frontier.queue import JsonPriorityQueue
from spiders_project.frontier.scheduler import FrontierScheduler
from spiders_project.insides.scrapy_redis_compat import (
    UNSUPPORTED_SETTINGS,
    NotSupportedHere,
    setting_problems,
)
from spiders_project.spiders.distributed import DistributedSpider
from tests.support.crawlers import project_crawler


def test_the_project_settings_have_no_problem() -> None:
    assert setting_problems(load_settings()) == []


@pytest.mark.parametrize("name", sorted(UNSUPPORTED_SETTINGS))
def test_every_unhonoured_scrapy_redis_setting_is_named(name: str) -> None:
    [problem] = setting_problems(load_settings({name: "x"}))
    assert problem.startswith(f"{name} is a scrapy-redis setting this project ignores: ")


def test_a_fixed_class_and_the_blocking_stats_collector_are_refused() -> None:
    settings = load_settings(
        {
            "SCHEDULER_QUEUE_CLASS": "scrapy_redis.queue.PriorityQueue",
            "STATS_CLASS": "scrapy_redis.stats.RedisStatsCollector",
            "DUPEFILTER_DEBUG": "True",
        }
    )
    problems = setting_problems(settings)
    assert len(problems) == 3
    assert "SCHEDULER_QUEUE_CLASS must be" in problems[0]
    assert "DUPEFILTER_DEBUG is not honoured" in problems[1]
    assert "STATS_CLASS" in problems[2]


def test_inherited_methods_that_would_break_refuse_with_what_to_use() -> None:
    crawler = project_crawler(DistributedSpider)
    client = redis.asyncio.Redis()  # never connected: nothing here may reach it
    queue = JsonPriorityQueue(client, DistributedSpider(), "k")
    for call in (lambda: queue.push(None), queue.pop, queue.clear, lambda: len(queue)):
        with pytest.raises(NotSupportedHere, match="not supported here"):
            call()
    spider = DistributedSpider.from_crawler(crawler)
    for method in ("start_requests", "next_requests", "schedule_next_requests"):
        with pytest.raises(NotSupportedHere, match=f"RedisMixin.{method}"):
            getattr(spider, method)()
    with pytest.raises(NotSupportedHere, match="SCHEDULER_FLUSH_ON_START"):
        FrontierScheduler.flush(object())  # type: ignore[arg-type]


def test_scrapy_redis_item_pipeline_of_a_ported_project_is_refused() -> None:
    settings = load_settings({"ITEM_PIPELINES": {"scrapy_redis.pipelines.RedisPipeline": 300}})
    [problem] = setting_problems(settings)
    assert problem.startswith("ITEM_PIPELINES has scrapy_redis.pipelines.RedisPipeline")


def test_settings_object_is_untouched() -> None:
    settings = Settings()
    setting_problems(settings)
    assert settings.get("SCHEDULER_QUEUE_CLASS") is None
