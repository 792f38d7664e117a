"""Browser restarts without a browser: due after a page quota or on request,
each once the pages in flight are done."""

from __future__ import annotations

import asyncio
import dataclasses

from spiders_project.config import load_settings
from spiders_project.rendering.config import RenderConfig
from spiders_project.rendering.restarts import BrowserRestarts


class Stats(dict):
    def inc_value(self, key, count=1):
        self[key] = self.get(key, 0) + count

    def max_value(self, key, value):
        self[key] = max(self.get(key, value), value)


def restarts(**render) -> tuple[BrowserRestarts, list[tuple[str, str]]]:
    """Restarts whose ``restart`` records why it ran, and starts the next browser."""
    config = dataclasses.replace(RenderConfig.from_settings(load_settings()), **render)
    done: list[tuple[str, str]] = []

    async def restart() -> None:
        done.append(made.due_because)
        made.new_browser()

    made = BrowserRestarts(config, Stats(), restart, lambda: True)
    return made, done


def test_a_restart_waits_for_the_pages_in_flight() -> None:
    async def main() -> None:
        made, done = restarts(pages_per_context=2, pages_per_browser=2)
        first = await made.next_context()
        await made.next_context()
        third = asyncio.ensure_future(made.next_context())  # the browser's share is used up
        await asyncio.sleep(0.01)
        assert not third.done() and done == []
        assert made.page_done(first) is False
        assert made.page_done(first) is True  # both pages done: its context is retired
        assert await third == "render-1"
        assert done == [("pages", "after 2 pages (RENDER_PAGES_PER_BROWSER)")]

    asyncio.run(main())


def test_a_slow_browser_is_restarted_once_for_it() -> None:
    async def main() -> None:
        made, done = restarts(slowdown=2.0)
        for _ in range(30):
            made.rendered(0.1)
        for _ in range(30):
            made.rendered(1.0)
        made.restart_soon("memory", "asked again")  # a restart is due already: not replaced
        await made.next_context()
        [(kind, reason)] = done
        assert kind == "slowdown" and "RENDER_SLOWDOWN_FACTOR=2" in reason

    asyncio.run(main())
