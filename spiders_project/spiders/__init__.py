"""The project's spiders, and the base classes for yours.

``from spiders_project.spiders import RedisSpider, RedisCrawlSpider`` is all a
spider written for scrapy-redis changes to run here (docs/SPIDERS.md).
"""

from spiders_project.spiders.base import RedisSpider
from spiders_project.spiders.variants import RedisCrawlSpider, RedisSitemapSpider

__all__ = ["RedisCrawlSpider", "RedisSitemapSpider", "RedisSpider"]
