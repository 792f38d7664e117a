"""Per-crawler shared objects are built one way; events reach every subscriber."""

from __future__ import annotations

import pytest
from scrapy import Spider
from scrapy.utils.test import get_crawler

from spiders_project.plumbing.wiring import Subscribers, shared
from spiders_project.rendering.slots import RenderSlots


class _Thing:
    def __init__(self, size: int) -> None:
        self.size = size


def test_one_object_per_crawler_built_once() -> None:
    a, b = get_crawler(Spider), get_crawler(Spider)
    built: list[int] = []

    def build(size: int) -> _Thing:
        built.append(size)
        return _Thing(size)

    first = shared(a, _Thing, lambda: build(4), 4)
    assert shared(a, _Thing, lambda: build(4), 4) is first
    assert shared(b, _Thing, lambda: build(4), 4) is not first
    assert built == [4, 4]


def test_a_second_caller_with_other_arguments_is_an_error() -> None:
    crawler = get_crawler(Spider)
    RenderSlots.of(crawler, 4)
    assert RenderSlots.of(crawler, 4).size == 4
    with pytest.raises(ValueError, match=r"RenderSlots of this crawler was built for \(4,\)"):
        RenderSlots.of(crawler, 8)


def test_every_subscriber_hears_every_event_in_order() -> None:
    heard: list[tuple[str, int, int]] = []
    event: Subscribers[[int, int]] = Subscribers()
    event(1, 1)  # nobody listens: nothing happens
    event.subscribe(lambda sent, added: heard.append(("first", sent, added)))
    event.subscribe(lambda sent, added: heard.append(("second", sent, added)))
    event(3, 2)
    assert heard == [("first", 3, 2), ("second", 3, 2)]
    assert len(event) == 2
