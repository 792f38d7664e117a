# Define here the models for your spider middleware
#
# See documentation in:
# https://docs.scrapy.org/en/latest/topics/spider-middleware.html

from scrapy import Request, signals


class OwnProjectSpiderMiddleware:
    """Counts the links each page yields, into that page's items."""

    @classmethod
    def from_crawler(cls, crawler):
        s = cls()
        crawler.signals.connect(s.spider_opened, signal=signals.spider_opened)
        return s

    async def process_spider_output_async(self, response, result):
        items, links = [], 0
        async for item_or_request in result:
            if isinstance(item_or_request, Request):
                links += 1
                yield item_or_request
            else:
                items.append(item_or_request)
        for item in items:
            item.links = links
            yield item

    def process_spider_output(self, response, result):
        items, links = [], 0
        for item_or_request in result:
            if isinstance(item_or_request, Request):
                links += 1
                yield item_or_request
            else:
                items.append(item_or_request)
        for item in items:
            item.links = links
            yield item

    def spider_opened(self, spider):
        spider.logger.info(f"Spider opened: {spider.name}")


class OwnProjectDownloaderMiddleware:
    """Marks every request it sees on its way to the site."""

    def process_request(self, request):
        request.meta["fetched_by"] = "OwnProjectDownloaderMiddleware"
        return None
