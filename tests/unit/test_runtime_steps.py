"""FRONTIER_STEPS: built from the setting in order, each hook gathered once."""

from __future__ import annotations

import pytest
from scrapy import Request
from scrapy.exceptions import NotConfigured

from spiders_project.config import ConfigError, load_settings
from spiders_project.frontier.steps import Enqueue, FrontierSteps, StepsConfig
from spiders_project.keys import HTTP
from spiders_project.spiders.distributed import DistributedSpider
from tests.support.crawlers import NEVER_CONNECTS, project_crawler

DEFAULT_ORDER = [
    "SeedEntryStep",
    "UrlRulesStep",
    "SeedLimitsStep",
    "ForgetProxyStep",
    "ForgetCookiesStep",
    "RetryWaitStep",
    "RenderRouteStep",
    "PolitenessKeyStep",
    "BlockedHostStep",
    "JobStep",
]


class Marks:
    """A step that notes each request it sees in its meta."""

    def __init__(self, name: str) -> None:
        self.name = name

    def admit(self, request: Request, entry: Enqueue) -> Request:
        request.meta.setdefault("seen_by", []).append(self.name)
        return request


class First(Marks):
    def __init__(self) -> None:
        super().__init__("first")


class Second(Marks):
    def __init__(self) -> None:
        super().__init__("second")


class DropsAll:
    def admit(self, request: Request, entry: Enqueue) -> None:
        return None


class Groups:
    def group_of(self, url: str) -> str:
        return "one-group"

    def delay_ms(self, group: str) -> int:
        return 250


class NoHook:
    def addmit(self, request: Request, entry: Enqueue) -> Request:  # misspelt
        return request


def steps_of(settings: dict) -> FrontierSteps:
    crawler = project_crawler(DistributedSpider, {"REDIS_URL": NEVER_CONNECTS, **settings})
    return FrontierSteps.of(crawler)


def test_the_default_steps_run_in_their_order():
    steps = steps_of({})
    assert [type(s).__name__ for s in steps.steps] == DEFAULT_ORDER


def test_project_steps_merge_over_the_base_by_order_and_none_switches_one_off():
    here = __name__
    steps = steps_of(
        {
            "FRONTIER_STEPS": {
                f"{here}.Second": 150,
                f"{here}.First": 50,
                "spiders_project.proxies.steps.ForgetProxyStep": None,
            }
        }
    )
    names = [type(s).__name__ for s in steps.steps]
    assert names[:3] == ["First", "SeedEntryStep", "Second"]
    assert "ForgetProxyStep" not in names
    request = steps.admit(Request("http://a.example/"), Enqueue())
    assert request is not None and request.meta["seen_by"] == ["first", "second"]


def test_a_step_that_drops_ends_the_chain():
    steps = FrontierSteps([First(), DropsAll(), Second()])
    request = Request("http://a.example/")
    assert steps.admit(request, Enqueue()) is None
    assert request.meta["seen_by"] == ["first"]


def test_without_a_politeness_step_a_url_queues_under_its_host_with_no_delay():
    steps = FrontierSteps([First()])
    assert steps.group_of("https://Shop.Example:443/a") == "shop.example"
    assert steps.delay_ms("shop.example") == 0
    grouped = FrontierSteps([First(), Groups()])
    assert grouped.group_of("https://shop.example/a") == "one-group"
    assert grouped.delay_ms("one-group") == 250


def test_a_step_with_no_hook_stops_the_worker_at_start():
    with pytest.raises(NotConfigured, match="NoHook defines none of the hooks"):
        FrontierSteps([First(), NoHook()])


def test_an_entry_starts_as_a_plain_http_request():
    entry = Enqueue()
    assert (entry.seed_entry, entry.record, entry.wait_ms, entry.recrawl_after, entry.lane) == (
        b"",
        False,
        0,
        None,
        HTTP,
    )


@pytest.mark.parametrize(
    ("steps", "problem"),
    [
        ({"spiders_project.no_such_module.Step": 10}, "cannot load spiders_project.no_such"),
        ({"spiders_project.scope.steps.NoSuchStep": 10}, "cannot load spiders_project.scope"),
        ("not a dict", "FRONTIER_STEPS="),
    ],
)
def test_a_path_that_does_not_load_is_one_config_error_naming_the_setting(steps, problem):
    with pytest.raises(ConfigError, match=problem):
        StepsConfig.from_settings(load_settings({"FRONTIER_STEPS": steps}))
