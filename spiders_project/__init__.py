"""A distributed Scrapy crawler: shared Redis frontier, item buffer, db_writer."""
