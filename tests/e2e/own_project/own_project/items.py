# Define here the models for your scraped items
#
# See documentation in:
# https://docs.scrapy.org/en/latest/topics/items.html

from dataclasses import dataclass


@dataclass
class OwnProjectItem:
    url: str
    title: str | None = None
    # Set by OwnProjectDownloaderMiddleware on the request, copied by the spider.
    fetched_by: str | None = None
    # Set by OwnProjectSpiderMiddleware on the way out of the spider.
    links: int | None = None
    # Set by OwnProjectPipeline.
    title_words: int | None = None
    checked: bool = False
