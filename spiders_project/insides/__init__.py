"""Where the project touches the insides of Scrapy, Playwright and scrapy-redis: one adapter,
checked at start.
"""
