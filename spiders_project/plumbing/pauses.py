"""Who holds the worker's engine paused: it fetches again only once every holder let go.

Several components pause fetching for reasons of their own: backpressure
while the item buffer is full, node health while this node cannot reach the
sites the cluster reaches. Each calling Scrapy's ``engine.pause()`` and
``unpause()`` directly, the first to resume would resume for all. Here each
holds and releases by name, and the engine runs while nobody holds it.

A holder that expects the pause to last asks for ``give_back``: the frontier
(which subscribes to ``given_back``) then returns the requests this worker
leased and has not started to their queues, for other workers, instead of
keeping them leased and renewed through the pause.
"""

from __future__ import annotations

from typing import Any

from scrapy.crawler import Crawler

from spiders_project.insides import internals
from spiders_project.plumbing.wiring import Subscribers, shared


class EnginePauses:
    """The crawler's pause holders (``of``), by name."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.holders: set[str] = set()
        # Told when a holder asks that leased, unstarted requests go back.
        self.given_back: Subscribers[[]] = Subscribers()

    @classmethod
    def of(cls, crawler: Crawler) -> EnginePauses:
        return shared(crawler, cls, lambda: cls(crawler))

    @property
    def held(self) -> bool:
        return bool(self.holders)

    def hold(self, who: str, *, give_back: bool = False) -> None:
        """Pause fetching until ``who`` releases it (and every other holder has)."""
        self.holders.add(who)
        engine = self._engine()
        if engine is not None:
            engine.pause()
        if give_back:
            self.given_back()

    def release(self, who: str) -> None:
        """``who`` no longer holds the engine; it runs again if nobody else does."""
        self.holders.discard(who)
        engine = self._engine()
        if not self.holders and engine is not None and engine.paused:
            engine.unpause()
            internals.wake_engine(engine)

    def release_all(self) -> list[str]:
        """Every holder lets go, for the spider to close; returns their names.

        A paused engine never looks whether it is idle, so a worker that decided
        to close (nothing left in the cluster) while a holder kept it paused (node
        health waiting for a dead site to answer) stayed up for good.
        """
        held = sorted(self.holders)
        for who in held:
            self.release(who)
        return held

    def _engine(self) -> Any:
        """The engine, or None before the crawl started (Scrapy raises then)."""
        try:
            return self.crawler.engine
        except RuntimeError:
            return None
