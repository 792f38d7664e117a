"""Rendering attempts without a browser: the deadline, crash retries and slots."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from scrapy import Request
from scrapy.http import HtmlResponse

from spiders_project.config import load_settings
from spiders_project.rendering.attempts import Attempts, current_attempt
from spiders_project.rendering.background import Background
from spiders_project.rendering.config import RenderConfig
from spiders_project.rendering.driver import Driver
from spiders_project.rendering.errors import BrowserCrashed, RenderTimeout
from spiders_project.rendering.page_reuse import PageReuse
from spiders_project.rendering.restarts import BrowserRestarts
from spiders_project.rendering.slots import RenderSlots


class Stats(dict):
    def inc_value(self, key, count=1):
        self[key] = self.get(key, 0) + count

    def max_value(self, key, value):
        self[key] = max(self.get(key, value), value)


def attempts(download, **render) -> tuple[Attempts, Stats, list[str]]:
    """Attempts around ``download``, with a driver already started; closed contexts listed."""
    config = dataclasses.replace(RenderConfig.from_settings(load_settings()), **render)
    stats, closed = Stats(), []

    async def restart() -> None:
        pass

    driver = Driver("", launch=None, gone=None)  # never launches: started below
    driver.started = True
    made = Attempts(
        config,
        stats,
        slots=RenderSlots(config.concurrency),
        restarts=BrowserRestarts(config, stats, restart, lambda: True),
        reuse=PageReuse(config, stats, Background()),
        driver=driver,
        download=download,
        close_context=closed.append,
    )
    return made, stats, closed


def test_a_rendered_request_counts_its_page_and_carries_no_attempt_setting() -> None:
    seen = []

    async def download(request: Request) -> HtmlResponse:
        seen.append((request.meta["playwright_context"], current_attempt() is not None))
        return HtmlResponse(request.url, body=b"<html></html>")

    async def main() -> None:
        made, stats, _ = attempts(download)
        request = Request("https://example.com/")
        response = await made.render(request)
        assert response.url == request.url and seen == [("render-0", True)]
        assert stats["render/pages"] == 1 and stats["render/max_concurrent"] == 1
        assert "playwright_page_goto_kwargs" not in request.meta
        assert not made.slots.holds(request) and current_attempt() is None

    asyncio.run(main())


def test_an_attempt_past_its_deadline_is_cancelled() -> None:
    cancelled = []

    async def download(request: Request) -> HtmlResponse:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.append(request.url)
            raise
        raise AssertionError("not reached")

    async def main() -> None:
        made, stats, _ = attempts(download, deadline=0.05)
        with pytest.raises(RenderTimeout, match="RENDER_DEADLINE"):
            await made.render(Request("https://example.com/"))
        await asyncio.sleep(0)  # the attempt's task sees its cancellation
        assert stats["render/deadline_exceeded"] == 1 and cancelled == ["https://example.com/"]
        assert made.in_flight == 0 and made.restarts.recycler.in_flight == 0

    asyncio.run(main())


def test_attempts_cancelled_by_a_crash_are_retried_then_given_up() -> None:
    async def main() -> None:
        began = asyncio.Event()

        async def download(request: Request) -> HtmlResponse:
            began.set()
            await asyncio.sleep(60)
            raise AssertionError("not reached")

        made, stats, _ = attempts(download, crash_retries=2)
        rendering = asyncio.ensure_future(made.render(Request("https://example.com/")))
        for _ in range(3):  # the first attempt and its 2 retries
            await began.wait()
            began.clear()
            assert made.in_flight == 1
            made.crash_all()
        with pytest.raises(BrowserCrashed, match="died 3 times"):
            await rendering
        assert stats["render/crash_retries"] == 2 and "render/pages" not in stats

    asyncio.run(main())
