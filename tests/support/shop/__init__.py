"""A local shop site and the spiders that crawl it: the "any Scrapy spider" tests' world."""
