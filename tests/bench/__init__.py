"""``make bench``: throughput, cost per page and memory of the frontier against plain
Scrapy and stock scrapy-redis, plus the db_writer; see ``python -m tests.bench --help``."""
