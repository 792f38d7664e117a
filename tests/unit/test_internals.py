"""The adapter over Scrapy's and Playwright's private attributes, on a real engine.

Each test runs a real (tiny) Scrapy crawl in this process: a plain
``scrapy.Spider`` that fetches one ``data:`` URL, with Scrapy's own scheduler
and no reactor, so neither Redis nor the network is involved. The adapter is
called from the spider's callback, while the engine is open and the request
is still being processed.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import psutil
import pytest
import scrapy
from scrapy.crawler import AsyncCrawlerRunner
from scrapy.http import Response

from spiders_project.insides import internals

ROOT = Path(__file__).resolve().parents[2]

OnParse = Callable[[Any, Response], None]


class _OneDataUrl(scrapy.Spider):
    """Fetches one ``data:`` URL and hands the open engine to ``on_parse``."""

    name = "one_data_url"

    def __init__(self, on_parse: OnParse, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.on_parse = on_parse

    async def start(self) -> AsyncIterator[scrapy.Request]:
        yield scrapy.Request("data:text/plain,hello")

    def parse(self, response: Response) -> None:
        self.on_parse(self.crawler.engine, response)


def crawl(on_parse: OnParse) -> Any:
    """Run the crawl to its end; return its (closed) engine.

    An exception raised in ``on_parse`` would only be logged by Scrapy, so
    callers record what they saw and assert after the crawl.
    """
    engines: list[Any] = []

    def record(engine: Any, response: Response) -> None:
        engines.append(engine)
        on_parse(engine, response)

    async def run() -> None:
        runner = AsyncCrawlerRunner({"TWISTED_REACTOR_ENABLED": False, "LOG_LEVEL": "ERROR"})
        await runner.crawl(_OneDataUrl, on_parse=record)

    asyncio.run(run())
    assert len(engines) == 1, "the spider's callback never ran"
    return engines[0]


def test_every_internal_is_there_on_an_open_engine() -> None:
    seen: dict[str, Any] = {}

    def on_parse(engine: Any, response: Response) -> None:
        internals.check_engine(engine)
        seen["in progress"] = response.request in internals.requests_in_progress(engine)
        seen["scraper idle"] = internals.scraper_is_idle(engine)
        seen["scheduler"] = internals.scheduler_of(engine)
        seen["engine scheduler"] = engine.scheduler
        internals.wake_engine(engine)
        internals.set_download_delay(engine, 0.0)
        seen["delay"] = engine.downloader._delay
        seen["checked"] = True

    crawl(on_parse)
    assert seen.pop("checked")
    assert seen == {
        # The callback runs while its request is still being processed: a lease
        # acknowledged now would be acknowledged before its items.
        "in progress": True,
        "scraper idle": False,
        "scheduler": seen["engine scheduler"],
        "engine scheduler": seen["engine scheduler"],
        "delay": 0.0,
    }
    assert seen["scheduler"] is not None


def test_a_missing_attribute_is_named_with_the_version() -> None:
    caught: list[BaseException] = []

    def on_parse(engine: Any, response: Response) -> None:
        slot = engine._slot
        inprogress = slot.inprogress
        del slot.inprogress  # as a Scrapy release that renamed it would
        try:
            for probe in (internals.check_engine, internals.requests_in_progress):
                try:
                    probe(engine)
                except internals.InternalsMissing as exc:
                    caught.append(exc)
        finally:
            slot.inprogress = inprogress

    crawl(on_parse)
    # requests_in_progress raised too: never an empty set, which would read
    # as "everything finished" and acknowledge leases before their items.
    assert len(caught) == 2
    for exc in caught:
        assert str(exc) == (
            f"Scrapy {scrapy.__version__} has no ExecutionEngine._slot.inprogress; "
            "this worker supports scrapy==2.19.0 (requirements.txt)"
        )


def test_a_closed_engine_has_no_slot_and_nothing_in_progress_is_not_assumed() -> None:
    engine = crawl(lambda engine, response: None)
    with pytest.raises(internals.InternalsMissing, match=r"ExecutionEngine\._slot"):
        internals.requests_in_progress(engine)
    with pytest.raises(internals.InternalsMissing, match=r"ExecutionEngine\._slot"):
        internals.check_engine(engine)
    internals.wake_engine(engine)  # closed: nothing to wake, and that is fine
    internals.wake_engine(None)  # no engine yet
    assert internals.scheduler_of(engine) is None
    assert internals.scraper_is_idle(engine)


class _EngineWithoutSlot:
    """An engine from a Scrapy release where ``_slot`` is gone (or renamed)."""

    scraper = None


def test_a_missing_slot_raises_even_where_no_slot_is_a_legitimate_state() -> None:
    for use in (internals.wake_engine, internals.requests_in_progress, internals.check_engine):
        with pytest.raises(internals.InternalsMissing, match=r"has no ExecutionEngine\._slot;"):
            use(_EngineWithoutSlot())
    with pytest.raises(internals.InternalsMissing, match=r"has no Scraper\.slot;"):
        internals.scraper_is_idle(_EngineWithoutSlot())


def test_the_supported_versions_are_the_pins_of_requirements_txt() -> None:
    pins = dict(
        re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)", (ROOT / "requirements.txt").read_text(), re.M)
    )
    for distribution, version in internals.PINNED.values():
        assert pins[distribution] == version, distribution


def test_check_playwright_starts_no_driver_and_no_browser() -> None:
    before = {child.pid for child in psutil.Process().children(recursive=True)}
    internals.check_playwright()
    after = {child.pid for child in psutil.Process().children(recursive=True)}
    assert after == before


class _Assigns:
    def __init__(self) -> None:
        self.kept = self.chained = 1
        self.annotated: int = 2

    def reads(self) -> int:
        return self.kept


def test_assignments_are_read_from_the_bytecode() -> None:
    for attribute in ("kept", "chained", "annotated"):
        assert internals._stores(_Assigns, "__init__", attribute)
    assert not internals._stores(_Assigns, "reads", "kept")  # a read is not an assignment
    assert not internals._stores(_Assigns, "__init__", "gone")
    assert not internals._stores(_Assigns, "renamed", "kept")


def test_a_playwright_message_names_the_playwright_version() -> None:
    from importlib.metadata import version

    message = str(internals.InternalsMissing("Transport.on_error_future", "Playwright"))
    assert message == (
        f"Playwright {version('playwright')} has no Transport.on_error_future; "
        "this worker supports playwright==1.65.2 (requirements.txt)"
    )


def test_scrapys_cookie_middleware_is_given_an_offline_suffix_list() -> None:
    from scrapy.downloadermiddlewares import cookies

    from spiders_project.crawl.suffixes import public_suffixes

    scrapys = cookies._split_domain
    assert scrapys.suffix_list_urls  # publicsuffix.org: what this replaces
    internals.check_cookies()
    offline = public_suffixes()
    try:
        internals.use_public_suffixes(offline)
        assert internals.cookie_public_suffixes() is offline
        assert offline.suffix_list_urls == ()
        # Scrapy's own function decides with it: a cookie for all of co.uk is refused.
        assert cookies._is_public_domain("co.uk")
        assert cookies._is_public_domain("github.io")  # private suffixes count
        assert not cookies._is_public_domain("example.co.uk")
    finally:
        cookies._split_domain = scrapys


def test_a_missing_suffix_list_of_the_cookie_middleware_is_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from scrapy.downloadermiddlewares import cookies

    from spiders_project.crawl.suffixes import public_suffixes

    monkeypatch.delattr(cookies, "_split_domain")  # as a Scrapy release that renamed it would
    for use in (
        internals.check_cookies,
        lambda: internals.use_public_suffixes(public_suffixes()),
    ):
        with pytest.raises(internals.InternalsMissing) as caught:
            use()
        assert str(caught.value) == (
            f"Scrapy {scrapy.__version__} has no "
            "scrapy.downloadermiddlewares.cookies._split_domain; "
            "this worker supports scrapy==2.19.0 (requirements.txt)"
        )
    assert not hasattr(cookies, "_split_domain")  # nothing was put in its place


def test_a_cookie_middleware_that_keeps_its_list_elsewhere_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from scrapy.downloadermiddlewares import cookies

    kept = cookies._split_domain

    def is_public(domain: str, split: Any = kept) -> bool:
        return not split(domain).domain

    # Replacing the module's global would then change nothing: refused, not ignored.
    monkeypatch.setattr(cookies, "_is_public_domain", is_public)
    with pytest.raises(internals.InternalsMissing, match=r"_is_public_domain\(\) reading"):
        internals.check_cookies()
