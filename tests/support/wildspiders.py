"""A spider for the guard tests: it follows every link, on any host, as a careless spider would.

``scrapy crawl everywhere -s SPIDER_MODULES=tests.support.wildspiders``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from scrapy import Request
from scrapy.http import Response, TextResponse

from spiders_project.spiders import RedisSpider


class Everywhere(RedisSpider):
    name = "everywhere"

    def parse(self, response: Response) -> Iterator[Any]:
        yield {"url": response.url, "status": response.status}
        if isinstance(response, TextResponse):
            for href in response.xpath("//a/@href").getall():
                yield Request(response.urljoin(href))
