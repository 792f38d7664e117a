"""A distributed Scrapy crawler: shared Redis frontier, item buffer, db_writer."""

# The crawler's version, as its WARC files' warcinfo records name it
# (spiders_project/archive/). Raised with each release.
__version__ = "0.28.0"
