"""``scrapy crawl distributed``: one item per HTML page, links on the seed's host."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import urljoin

from scrapy import Request
from scrapy.http import Response, TextResponse
from w3lib.url import canonicalize_url

from spiders_project.crawl.hosts import host_key, host_of
from spiders_project.crawl.meta import RENDER, SPIDER_SCOPE
from spiders_project.items import PageItem
from spiders_project.scope.seeds import Seed
from spiders_project.spiders.base import RedisSpider


class DistributedSpider(RedisSpider):
    name = "distributed"

    def make_request_from_seed(self, seed: Seed) -> Request:
        request = super().make_request_from_seed(seed)
        if seed.sitemap:
            # The pages a sitemap lists keep its seed's host as their scope
            # (sitemaps.carried), wherever the sitemaps themselves are.
            request.meta.setdefault(SPIDER_SCOPE, host_of(seed.url))
        # A seed's {"playwright": true} renders the seed and the pages followed
        # from it on its host: "render" is what the links carry (see rendering.rules).
        if request.meta.get("playwright") is True:
            request.meta.setdefault(RENDER, True)
        return request

    def parse(self, response: Response) -> Iterator[Any]:
        if not isinstance(response, TextResponse) or b"html" not in (
            response.headers.get(b"Content-Type") or b""
        ):
            return
        # The scope is the host of the first URL of the redirect chain, stored
        # in meta only when it differs from the request's own host (a queued
        # request carries no copy of its host, to keep queued entries small).
        # host_key: requests queued by an older release carry the scope as it
        # was written then (IDN, ":80"); links are compared in host_of's form.
        first_url = (response.meta.get("redirect_urls") or [response.url])[0]
        scope = host_key(response.meta.get(SPIDER_SCOPE) or host_of(first_url))
        yield PageItem(
            url=canonicalize_url(response.url),
            status=response.status,
            title=(response.xpath("//title/text()").get() or "").strip() or None,
            fetched_at=self.redis.time.now_datetime().isoformat(timespec="milliseconds"),
            depth=response.meta.get("depth", 0),
            spider=self.name,
            # Set by the rendering handler on what Chromium rendered; meta
            # "playwright" only says the request asked for it.
            rendered="playwright" in response.flags,
        )
        follow_meta: dict[str, Any] = {}
        if response.meta.get(RENDER) is True:
            follow_meta[RENDER] = True
        seen: set[str] = set()
        for href in response.xpath("//a/@href").getall():
            url = urljoin(response.url, href.strip()).split("#", 1)[0]
            if url in seen or not url.startswith(("http://", "https://")):
                continue
            seen.add(url)
            if host_of(url) != scope:
                continue
            yield Request(url, callback=self.parse, meta=dict(follow_meta))
