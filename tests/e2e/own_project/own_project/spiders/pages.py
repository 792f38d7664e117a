from own_project.items import OwnProjectItem
from spiders_project.spiders import RedisSpider


class PagesSpider(RedisSpider):
    """Seeded with ``redis-cli lpush pages:start_urls URL``: one item a page."""

    name = "pages"

    def parse(self, response):
        yield OwnProjectItem(
            url=response.url,
            title=response.css("title::text").get(),
            fetched_by=response.meta.get("fetched_by"),
        )
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href, callback=self.parse)
