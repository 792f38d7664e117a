"""Rendering's frontier step: requests that will render go to the render queue."""

from __future__ import annotations

from scrapy import Request

from spiders_project.crawl.meta import RENDER as RENDER_META
from spiders_project.frontier.steps import Enqueue
from spiders_project.keys import HTTP, RENDER
from spiders_project.rendering.steps import RenderRouteStep
from spiders_project.spiders.distributed import DistributedSpider
from tests.support.crawlers import NEVER_CONNECTS, project_crawler


def step_with(**settings) -> RenderRouteStep:
    crawler = project_crawler(DistributedSpider, {"REDIS_URL": NEVER_CONNECTS, **settings})
    return RenderRouteStep.from_crawler(crawler)


def test_a_request_that_renders_goes_to_the_render_queue():
    step = step_with()
    entry = Enqueue()
    step.route(Request("http://a.example/", meta={RENDER_META: True}), entry)
    assert entry.lane == RENDER
    plain = Enqueue()
    step.route(Request("http://a.example/"), plain)
    assert plain.lane == HTTP


def test_with_rendering_off_everything_goes_to_the_http_queue():
    entry = Enqueue()
    step_with(RENDER_ENABLED=False).route(
        Request("http://a.example/", meta={RENDER_META: True}), entry
    )
    assert entry.lane == HTTP
