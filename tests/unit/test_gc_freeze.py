"""worker/gc_freeze.py: start-up's objects frozen once the spider opens, unless switched off."""

from __future__ import annotations

import gc
import weakref

import pytest
from scrapy import signals
from scrapy.exceptions import NotConfigured
from scrapy.utils.test import get_crawler

from spiders_project.worker.gc_freeze import FreezeStartup


class _Cycle:
    def __init__(self) -> None:
        self.me = self


def test_it_is_off_with_its_setting():
    with pytest.raises(NotConfigured):
        FreezeStartup.from_crawler(get_crawler(settings_dict={"WORKER_GC_FREEZE": "false"}))


def test_the_spider_opening_freezes_what_lives_and_collects_what_does_not():
    crawler = get_crawler(settings_dict={"WORKER_GC_FREEZE": True})
    extension = FreezeStartup.from_crawler(crawler)  # signals hold handlers weakly
    garbage = _Cycle()
    gone = weakref.ref(garbage)
    del garbage
    try:
        crawler.signals.send_catch_log(signals.spider_opened, spider=None)
        assert gc.get_freeze_count() > 0
        assert gone() is None  # start-up's garbage was collected, not frozen
    finally:
        gc.unfreeze()
    assert extension is not None
