"""Page reuse around attempts, with stand-in pages: lent, taken back, closed."""

from __future__ import annotations

import asyncio
import dataclasses

from scrapy import Request

from spiders_project.config import load_settings
from spiders_project.rendering.background import Background
from spiders_project.rendering.config import RenderConfig
from spiders_project.rendering.page_reuse import PageReuse


class Stats(dict):
    def inc_value(self, key, count=1):
        self[key] = self.get(key, 0) + count


class FakePage:
    def __init__(self) -> None:
        self.closed = False

    def is_closed(self) -> bool:
        return self.closed

    async def close(self) -> None:
        self.closed = True


def reuse(**render) -> tuple[PageReuse, Stats, Background]:
    config = dataclasses.replace(RenderConfig.from_settings(load_settings()), **render)
    stats, background = Stats(), Background()
    return PageReuse(config, stats, background), stats, background


def test_a_page_serves_its_share_of_urls_then_closes() -> None:
    async def main() -> None:
        pages, stats, background = reuse(
            urls_per_page=2, idle_page_close=60.0, gc_between_urls=False
        )
        page = FakePage()
        for url in ("https://example.com/1", "https://example.com/2"):
            request, opened = Request(url), []
            pages.lend(request, "ctx", opened)
            assert request.meta["playwright_include_page"] is True
            if not opened:  # scrapy-playwright opens the first page
                opened.append(page)
            request.meta["playwright_page"] = page
            pages.take_back(request, "ctx", opened)
            pages.settle(request, True, opened)
            assert opened == [] and request.meta == {}
        await background.wait()
        assert stats == {"render/pages_reused": 1} and page.closed

    asyncio.run(main())


def test_the_pages_of_a_failed_attempt_are_never_lent_again() -> None:
    async def main() -> None:
        pages, stats, background = reuse(urls_per_page=4)
        request, page = Request("https://example.com/"), FakePage()
        pages.lend(request, "ctx", [])
        request.meta["playwright_page"] = page
        pages.settle(request, True, [page])  # the download raised: not taken back
        crashed = FakePage()
        pages.crashed(crashed)
        await background.wait()
        assert page.closed and crashed.closed and request.meta == {}
        assert pages.pool.take("ctx") is None and stats == {"render/page_crashes": 1}

    asyncio.run(main())
