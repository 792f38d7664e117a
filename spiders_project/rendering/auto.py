"""``RENDER_MODE = auto``: HTTP first, a browser only for the pages that need one.

Users rarely know in advance which pages need JavaScript; rendering every
page costs many times what an HTTP fetch does (docs/BENCHMARKS.md, "Rendering"
against "Throughput and cost per page"), and rendering none misses content. In
auto mode a page is fetched over HTTP first, and the spider's expectation is
checked on that response (:func:`needs_javascript`):

- a CSS selector per URL pattern (``RENDER_AUTO_RULES``, ``{regex: selector}``):
  the page needs JavaScript when the selector matches nothing;
- otherwise a detector of script-built pages: an empty app root
  (``<div id="root"></div>``), a ``<noscript>`` asking for JavaScript on a page
  with little else, or almost no visible text on a page that loads scripts.

A page that fails is sent to the frontier's render queue with
``"playwright": true`` (rendered once, its links not forced to render) and
its HTTP response dropped; one that passes is parsed as it is.

The outcome is learned per **section** (the host and the first path segment,
digits folded: ``shop.example/p``), shared by every worker through one Redis
hash (``<spider>:render:auto``: ``<section> js`` and ``<section> http`` counts;
on a sharded frontier each page counts in its own shard's hash, with its other
writes, and a worker reads every shard's).
Once ``RENDER_AUTO_LEARN`` pages of a section needed JavaScript, and they are
at least ``LEARNED_SHARE`` of its pages checked, its new requests go straight
to the render queue (no wasted HTTP fetch); a section whose pages pass stays
HTTP, each page still checked (a late JS-only page is still caught). Each
worker reads the hash every ``REFRESH`` seconds, and counts its own outcomes
at once.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import redis.exceptions as redis_errors
from scrapy import Request
from scrapy.crawler import Crawler
from scrapy.http import Response, TextResponse
from scrapy.statscollectors import StatsCollector

from spiders_project.crawl.meta import RENDER as RENDER_META
from spiders_project.frontier.context import WorkerRedis
from spiders_project.frontier.page_shards import PageShards
from spiders_project.plumbing.wiring import shared
from spiders_project.redis_access import RedisUnavailable
from spiders_project.rendering.config import RenderConfig, UrlRule
from spiders_project.rendering.rules import to_render_queue

logger = logging.getLogger(__name__)

# Seconds between two reads of the cluster's learned sections.
REFRESH = 5.0
# Share of a section's checked pages that must have needed JavaScript before
# its pages go straight to the browser.
LEARNED_SHARE = 0.5
# The detector: ids of the roots single-page apps mount into.
APP_ROOTS = ("root", "app", "__next", "__nuxt", "___gatsby", "svelte", "main-app")
# Visible characters below which a page that loads scripts counts as script-built.
LITTLE_TEXT = 50
# Visible characters below which a <noscript> asking for JavaScript decides.
NOSCRIPT_TEXT = 500

_DIGITS = re.compile(r"\d+")


def section_of(url: str) -> str:
    """Where a URL belongs for learning: host[:port] and first path segment, digits folded."""
    parts = urlsplit(url)
    first = parts.path.lstrip("/").split("/", 1)[0]
    return f"{parts.netloc.lower()}/{_DIGITS.sub('#', first)}"


def needs_javascript(response: TextResponse, selector: str | None) -> str | None:
    """Why the HTML of ``response`` lacks what a browser would show, or None."""
    if selector is not None:
        if response.css(selector):
            return None
        return f"no match for {selector!r} (RENDER_AUTO_RULES)"
    for root in APP_ROOTS:
        found = response.xpath(f'//*[@id="{root}"]')
        if (
            found
            and not found.xpath("./*")
            and not "".join(found.xpath(".//text()").getall()).strip()
        ):
            return f"empty app root #{root}"
    visible = "".join(
        response.xpath(
            "//body//text()[not(ancestor::script) and not(ancestor::style)"
            " and not(ancestor::noscript) and not(ancestor::template)]"
        ).getall()
    )
    text = len(" ".join(visible.split()))
    noscript = " ".join(response.xpath("//noscript//text()").getall()).lower()
    if "javascript" in noscript and text < NOSCRIPT_TEXT:
        return "a <noscript> asks for JavaScript"
    if text < LITTLE_TEXT and response.xpath("//script[@src]"):
        return f"{text} visible characters, and scripts"
    return None


@dataclass
class Learned:
    """Per section, how many checked pages needed JavaScript and how many did not."""

    learn: int  # RENDER_AUTO_LEARN
    js: dict[str, int] = field(default_factory=dict)
    http: dict[str, int] = field(default_factory=dict)

    def renders(self, section: str) -> bool:
        """Whether the section's pages go straight to the browser."""
        js, http = self.js.get(section, 0), self.http.get(section, 0)
        return js >= self.learn and js >= LEARNED_SHARE * (js + http)

    def count(self, section: str, needed: bool) -> None:
        seen = self.js if needed else self.http
        seen[section] = seen.get(section, 0) + 1

    def load(self, fields: Mapping[bytes, bytes]) -> None:
        """The cluster's counts (HGETALL of the hash), replacing ours where larger."""
        for name, value in fields.items():
            section, _, kind = name.decode("utf-8", "replace").rpartition(" ")
            seen = self.js if kind == "js" else self.http if kind == "http" else None
            if seen is None:
                continue
            try:
                n = int(value)
            except ValueError:
                continue
            seen[section] = max(seen.get(section, 0), n)


class AutoRender:
    """What auto mode knows and decides; one per worker (``of``)."""

    def __init__(self, crawler: Crawler, config: RenderConfig) -> None:
        self.crawler = crawler
        self.enabled = config.enabled and config.mode == "auto"
        self.rules: tuple[UrlRule, ...] = config.auto_rules
        self.learned = Learned(config.auto_learn)
        self._read_at = 0.0
        self._reading = False
        self._read_task: asyncio.Future[None] | None = None

    @classmethod
    def of(cls, crawler: Crawler) -> AutoRender:
        return shared(
            crawler, cls, lambda: cls(crawler, RenderConfig.from_settings(crawler.settings))
        )

    def selector_for(self, url: str) -> str | None:
        for rule in self.rules:
            if rule.pattern.search(url):
                return rule.wait_selector
        return None

    def renders_directly(self, url: str) -> bool:
        """Whether a new request to ``url`` goes straight to the render queue."""
        self._refresh()
        if not self.learned.renders(section_of(url)):
            return False
        assert self.crawler.stats is not None
        self.crawler.stats.inc_value("render/auto/learned")
        return True

    def record(self, request: Request, needed: bool) -> None:
        """Count one checked page, here at once and in the cluster with the next write
        (in its shard's hash: ``frontier/page_shards.py``)."""
        section = section_of(request.url)
        self.learned.count(section, needed)
        redis = WorkerRedis.of(self.crawler)
        keys = redis.keys.of_shard(PageShards.of(self.crawler).of_request(request))
        redis.batcher.command(
            "HINCRBY", keys.render_auto, f"{section} {'js' if needed else 'http'}", 1
        )

    def _refresh(self) -> None:
        """Read the cluster's counts in the background, at most every REFRESH seconds."""
        now = time.monotonic()
        if self._reading or now - self._read_at < REFRESH:
            return
        self._read_at = now
        self._reading = True
        redis = WorkerRedis.of(self.crawler)

        # The spider's own hash (one Redis, or counts moved by crawlmove) and every shard's.
        hashes = [redis.keys, *redis.keys.all_shards] if redis.keys.sharded else [redis.keys]

        async def read() -> None:
            try:
                replies = await redis.pipelined(
                    "HGETALL render:auto", [("HGETALL", k.render_auto) for k in hashes], retry=False
                )
                for fields in replies:
                    self.learned.load(fields)
            except (RedisUnavailable, redis_errors.RedisError):
                pass  # logged by the call path (an error reply with its command); next time
            finally:
                self._reading = False

        self._read_task = asyncio.ensure_future(read())  # kept: a task is held weakly


class AutoRenderMiddleware:
    """Downloader middleware (582, after redirects are followed): in auto mode,
    checks each page fetched over HTTP and sends those that need JavaScript to
    the render queue (see the module docstring)."""

    def __init__(self, auto: AutoRender, stats: StatsCollector, crawler: Crawler) -> None:
        self.auto = auto
        self.stats = stats
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> AutoRenderMiddleware:
        assert crawler.stats is not None
        return cls(AutoRender.of(crawler), crawler.stats, crawler)

    def process_response(self, request: Request, response: Response) -> Response:
        if not self.auto.enabled or "playwright" in response.flags:
            return response
        if request.meta.get(RENDER_META) is False or response.status != 200:
            return response
        if not isinstance(response, TextResponse) or b"html" not in (
            response.headers.get(b"Content-Type") or b""
        ):
            return response
        why = needs_javascript(response, self.auto.selector_for(response.url))
        self.auto.record(request, why is not None)
        if why is None:
            self.stats.inc_value("render/auto/http_pages")
            return response
        self.stats.inc_value("render/auto/expectation_failed")
        logger.debug("Rendering %s: %s", request.url, why)
        rendered = request.replace(meta={**request.meta, "playwright": True})
        to_render_queue(
            self.crawler, rendered, f"needs JavaScript ({why}): sent to the render queue"
        )
