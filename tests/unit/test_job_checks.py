"""The worker's two checks on a paused or cancelled job's requests: the frontier
step as the engine takes one, the downloader middleware right before its fetch."""

from __future__ import annotations

import pytest
from scrapy import Request
from scrapy.exceptions import IgnoreRequest

from spiders_project.crawl.meta import JOB
from spiders_project.frontier.outcomes import request_dropped, request_held
from spiders_project.frontier.steps import HOLD
from spiders_project.jobs.fetch_gate import GATE_DROPPED, GATE_HELD, JobGate
from spiders_project.jobs.pause_step import DROPPED, HELD_BACK, JobStep
from spiders_project.jobs.state_loop import JobWatch
from spiders_project.spiders.distributed import DistributedSpider
from tests.support.crawlers import NEVER_CONNECTS, project_crawler

CONTROL = {b"paused-job": b"paused", b"cancelled-job": b"cancelled", b"default": b"paused"}


def request_of(job: str | None) -> Request:
    return Request("http://a.example/", meta={JOB: job} if job else {})


def crawler_with(control: dict[bytes, bytes]):
    crawler = project_crawler(DistributedSpider, {"REDIS_URL": NEVER_CONNECTS})
    JobWatch.of(crawler).update(control)
    return crawler


def test_the_watch_gives_each_request_its_jobs_state():
    watch = JobWatch.of(crawler_with(CONTROL))
    assert watch.state_of(request_of("paused-job")) == "paused"
    assert watch.state_of(request_of("cancelled-job")) == "cancelled"
    assert watch.state_of(request_of("other-job")) is None
    assert watch.state_of(request_of(None)) == "paused"  # no job: the job "default"
    watch.update({})
    assert watch.state_of(request_of("paused-job")) is None


def test_the_step_holds_a_paused_jobs_request_and_drops_a_cancelled_ones():
    crawler = crawler_with(CONTROL)
    step = JobStep.from_crawler(crawler)
    assert step.leased(request_of("paused-job")) is HOLD
    assert step.leased(request_of("cancelled-job")) is None
    other = request_of("other-job")
    assert step.leased(other) is other
    assert crawler.stats.get_value(HELD_BACK) == 1
    assert crawler.stats.get_value(DROPPED) == 1


@pytest.mark.parametrize(
    ("job", "signal", "stat"),
    [("paused-job", request_held, GATE_HELD), ("cancelled-job", request_dropped, GATE_DROPPED)],
)
def test_the_gate_stops_the_request_and_tells_the_frontier(job, signal, stat):
    crawler = crawler_with(CONTROL)
    gate = JobGate.from_crawler(crawler)
    told: list[Request] = []
    crawler.signals.connect(lambda request: told.append(request), signal=signal, weak=False)
    request = request_of(job)
    with pytest.raises(IgnoreRequest, match=f"job {job} is "):
        gate.process_request(request)
    assert told == [request]
    assert crawler.stats.get_value(stat) == 1


def test_the_gate_lets_other_jobs_through():
    crawler = crawler_with(CONTROL)
    gate = JobGate.from_crawler(crawler)
    assert gate.process_request(request_of("other-job")) is None
    assert crawler.stats.get_value(GATE_HELD) is None
