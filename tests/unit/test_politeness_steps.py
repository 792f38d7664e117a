"""Politeness's frontier steps: a retry's wait, a URL's group and its delay."""

from __future__ import annotations

from scrapy import Request

from spiders_project.crawl.meta import RETRY_WAIT
from spiders_project.frontier.steps import Enqueue
from spiders_project.politeness.delays import HostPoliteness
from spiders_project.politeness.groups import PolitenessKey
from spiders_project.politeness.steps import PolitenessKeyStep, RetryWaitStep


def test_a_retry_waits_its_backoff_and_the_key_is_never_stored():
    entry = Enqueue()
    request = RetryWaitStep().admit(Request("http://a.example/", meta={RETRY_WAIT: 2500}), entry)
    assert entry.wait_ms == 2500 and RETRY_WAIT not in request.meta
    other = Enqueue()
    RetryWaitStep().admit(Request("http://a.example/"), other)
    assert other.wait_ms == 0


def test_the_group_and_its_delay_come_from_the_politeness_settings():
    politeness = HostPoliteness(0.5, {"slow.com": 2.0}, 0.03, PolitenessKey("domain"))
    step = PolitenessKeyStep(politeness)
    assert step.group_of("https://www.slow.com/a") == "slow.com"
    assert step.delay_ms("slow.com") == 2000
    assert step.delay_ms("other.com") == 500
