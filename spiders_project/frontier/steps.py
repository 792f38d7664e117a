"""The steps a request takes into and out of the frontier, built from ``FRONTIER_STEPS``.

The scheduler stores and leases requests; what a feature does to a request
on its way (claim a seed's entry, normalise its URL, drop a trap, forget a
proxy's credentials, keep a retry waiting, send it to the render queue, name
its politeness group) is a step, listed in the setting with an order, the
way Scrapy builds its middlewares from ``DOWNLOADER_MIDDLEWARES(_BASE)``.
So the scheduler imports no feature, and a new feature (jobs, archives)
adds a step instead of another branch in ``enqueue_request``.

A step is any object built with ``from_crawler(crawler)`` (or ``cls()``) that
defines one or more of these hooks:

- ``admit(request, entry) -> Request | None``: before the dedup pre-filter,
  in order. Returns the request (maybe replaced, e.g. with its normalised
  URL) or None to drop it; a step that drops says why with a stat or a line.
- ``route(request, entry) -> None``: after the pre-filter, before the request
  is encoded, in order; for choices about requests that will be queued.
- ``leased(request) -> Request | Hold | None``: after a worker leased the
  request, before the engine gets it, in order. None drops it: its lease
  ends at once (acked, its host's slot given back), so no worker fetches it;
  the step says why with a stat. :data:`HOLD` keeps it queued, not fetched
  now: it goes back to its queue with its slot (a paused job's, which the
  lease script then keeps aside).
- ``stored(request) -> Request``: what a request loses before anything stores
  it for other workers or an operator to read (the frontier, a dead letter):
  credentials and this worker's own meta. Run in order on every request the
  frontier queues (before ``admit``) and on every dead letter.
- ``group_of(url) -> str``: the politeness group (queue) of a URL, used for
  every request queued and, on a sharded frontier, for the shard of its
  fingerprint. The last step that defines it wins; without any, the host.
- ``delay_ms(group) -> int``: the spacing of a group's turns, sent with each
  lease call. The last step that defines it wins; without any, 0.

A path naming an object with none of these hooks stops the worker at start:
a misspelt hook would otherwise switch the step off without a word.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from scrapy import Request
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured
from scrapy.settings import BaseSettings
from scrapy.utils.conf import build_component_list
from scrapy.utils.misc import build_from_crawler, load_object

from spiders_project.config import SettingsReader
from spiders_project.crawl.hosts import host_of
from spiders_project.crawl.meta import LEASE_SHARD, LEASED_AT
from spiders_project.keys import HTTP
from spiders_project.plumbing.wiring import shared

HOOKS = ("stored", "admit", "route", "leased", "group_of", "delay_ms")


class Hold:
    """What a ``leased`` hook returns to hand a request back to its queue unfetched."""

    def __repr__(self) -> str:
        return "HOLD"


HOLD = Hold()


@dataclass(slots=True)
class Enqueue:
    """What the steps decided about one request on its way to its queue.

    The scheduler reads it after the steps ran and passes it to the write
    batcher's enqueue; a step changes only the fields it owns.
    """

    # The raw start_urls entry this request claims (a seed's), removed from
    # the seed list by the script that enqueues the request; b"" for others.
    seed_entry: bytes = b""
    # Fingerprint it even though it is dont_filter (a seed: recorded as seen,
    # never filtered).
    record: bool = False
    # Milliseconds the request waits in its host's later-set (a retry's backoff).
    wait_ms: int = 0
    # This request's own recrawl interval (a seed's "recrawl_after"), or None
    # for RECRAWL_AFTER.
    recrawl_after: float | None = None
    # The queue lane: HTTP, or RENDER for a request that renders.
    lane: str = HTTP


@dataclass(frozen=True)
class StepsConfig:
    """FRONTIER_STEPS_BASE merged with FRONTIER_STEPS: the steps' classes, in order."""

    classes: tuple[type, ...]

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> StepsConfig:
        """Each path loaded, so a misspelt one stops the worker with one line naming it."""
        read = SettingsReader(settings)
        try:
            paths = build_component_list(settings.getwithbase("FRONTIER_STEPS"))
        except (TypeError, ValueError) as exc:
            read.fail("FRONTIER_STEPS", f"not a dict of dotted paths and orders ({exc})")
        classes = []
        for path in paths:
            try:
                classes.append(load_object(path))
            except (ImportError, NameError, ValueError) as exc:
                read.fail("FRONTIER_STEPS", f"cannot load {path}: {exc}")
        return cls(tuple(classes))


def _no_delay(group: str) -> int:
    return 0


class FrontierSteps:
    """The ordered steps of one worker, with each hook's callables gathered once.

    Gathered at start, so a request pays one loop per hook, not a lookup per
    step; built once per crawler (``of``) and shared by the scheduler and the
    dupefilter.
    """

    def __init__(self, steps: Sequence[object]) -> None:
        for step in steps:
            if not any(callable(getattr(step, hook, None)) for hook in HOOKS):
                raise NotConfigured(
                    f"FRONTIER_STEPS: {type(step).__module__}.{type(step).__qualname__} "
                    f"defines none of the hooks {', '.join(HOOKS)}"
                )
        self.steps = list(steps)
        self._stored = self._hooks("stored")
        self._admit = self._hooks("admit")
        self._route = self._hooks("route")
        self._leased = self._hooks("leased")
        groups = self._hooks("group_of")
        delays = self._hooks("delay_ms")
        self.group_of: Callable[[str], str] = groups[-1] if groups else host_of
        self.delay_ms: Callable[[str], int] = delays[-1] if delays else _no_delay

    def _hooks(self, name: str) -> list[Callable[..., Any]]:
        return [getattr(s, name) for s in self.steps if callable(getattr(s, name, None))]

    @classmethod
    def of(cls, crawler: Crawler) -> FrontierSteps:
        """The crawler's steps, built from FRONTIER_STEPS_BASE and FRONTIER_STEPS."""

        def build() -> FrontierSteps:
            classes = StepsConfig.from_settings(crawler.settings).classes
            return cls([build_from_crawler(step, crawler) for step in classes])

        return shared(crawler, cls, build)

    def stored(self, request: Request) -> Request:
        """Run every ``stored`` hook in order: ``request`` as it may be stored.

        The frontier's own stamps of its last lease go first: a lease's
        time and shard mean nothing to another worker (crawl/meta.py)."""
        meta = request.meta
        meta.pop(LEASED_AT, None)
        meta.pop(LEASE_SHARD, None)
        for stored in self._stored:
            request = stored(request)
        return request

    def admit(self, request: Request, entry: Enqueue) -> Request | None:
        """Run every ``stored`` hook, then every ``admit`` hook, in order; None once
        one drops the request."""
        request = self.stored(request)
        for admit in self._admit:
            admitted = admit(request, entry)
            if admitted is None:
                return None
            request = admitted
        return request

    def route(self, request: Request, entry: Enqueue) -> None:
        """Run every ``route`` hook in order."""
        for route in self._route:
            route(request, entry)

    def leased(self, request: Request) -> Request | Hold | None:
        """Run every ``leased`` hook in order; None once one drops the request,
        HOLD once one holds it back."""
        for leased in self._leased:
            kept = leased(request)
            if kept is None or kept is HOLD:
                return kept
            request = kept
        return request
