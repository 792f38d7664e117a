"""Every setting of the project, declared once, with its default.

Values that differ between deployments come from environment variables
(REDIS_URL, DB_URL, ...); every name here can still be overridden on the
command line with ``scrapy crawl distributed -s NAME=VALUE``.  The db_writer
and the monitor load this same module, so a default never lives twice.
"""

import os

BOT_NAME = "spiders_project"
SPIDER_MODULES = ["spiders_project.spiders"]
NEWSPIDER_MODULE = "spiders_project.spiders"
COMMANDS_MODULE = "spiders_project.commands"


def _env(name: str, default: str) -> str:
    return os.environ.get(name, default)


# --- Connections -------------------------------------------------------------
# The shared Redis of the cluster. rediss:// and redis://:password@host work.
REDIS_URL = _env("REDIS_URL", "redis://localhost:6379/0")
# Where the db_writer stores items, spelled as SQLAlchemy spells URLs:
# sqlite:///relative.db, sqlite:////abs/path.db, postgresql://user@host/db.
DB_URL = _env("DB_URL", "sqlite:///data/items.db")
# Seconds to wait for Redis to answer before a call counts as failed.
REDIS_SOCKET_TIMEOUT = float(_env("REDIS_SOCKET_TIMEOUT", "10"))
# Reconnect backoff: first wait and cap, in seconds (doubles each failure).
REDIS_RECONNECT_BACKOFF = 0.2
REDIS_RECONNECT_BACKOFF_MAX = 5.0

# --- The frontier (scheduler, queue, dupefilter) -----------------------------
# scrapy-redis' Scheduler, subclassed so its Redis I/O never blocks the reactor.
SCHEDULER = "spiders_project.frontier.scheduler.FrontierScheduler"
DUPEFILTER_CLASS = "spiders_project.frontier.dupefilter.FingerprintDupeFilter"
SCHEDULER_QUEUE_CLASS = "spiders_project.frontier.queue.JsonPriorityQueue"
# JSON, never pickle: nothing read from Redis is ever unpickled.
SCHEDULER_SERIALIZER = "spiders_project.frontier.serialize"
# Crawl state is shared by the cluster: a stopping worker never flushes it.
SCHEDULER_PERSIST = True
SCHEDULER_FLUSH_ON_START = False
# Pending writes (new requests, items, acks) are sent in one pipeline at most
# this often, in seconds. Larger batches mean fewer round trips per page.
FRONTIER_FLUSH_INTERVAL = 0.05
# Requests a worker leases beyond its free download slots. 0 keeps leases to
# what it can start at once, which politeness needs (a lease is a turn).
FRONTIER_PREFETCH = 0
# A popped request is leased for this many seconds; a live worker renews its
# leases every third of it, so only a dead worker's leases expire and are put
# back in their queue by any other worker.
FRONTIER_LEASE_TIMEOUT = 30.0
# How long (seconds) a closing worker keeps trying to hand its writes and
# unfinished leases back to Redis before giving up (its leases then expire).
FRONTIER_CLOSE_TIMEOUT = 10.0

# --- Politeness, cluster-wide --------------------------------------------------
# Seconds between two fetches from one host by the whole cluster (not per
# worker). Enforced by the frontier; each worker's own downloader delay is 0.
DOWNLOAD_DELAY = float(_env("DOWNLOAD_DELAY", "0"))
# Per-host overrides, {"host[:port]": seconds}.
HOST_DOWNLOAD_DELAYS: dict[str, float] = {}
# Added to every non-zero delay (seconds): absorbs the time between a lease
# and the request leaving the worker, so the site sees at least the delay.
POLITENESS_GUARD = 0.02
# Retry-After of a 429/503 answer pauses its host for that long, capped here.
RETRY_AFTER_MAX = 600.0
DOWNLOADER_MIDDLEWARES = {
    # Just before RetryMiddleware (550): it sees only what RetryMiddleware gave up on.
    "spiders_project.middlewares.dead_letters.DeadLetterMiddleware": 540,
    # Just after it: sees every 429/503 (Retry-After) and robots.txt answer.
    "spiders_project.middlewares.politeness.SitePacingMiddleware": 560,
}

# --- Dead letters ----------------------------------------------------------------
# Requests that failed for good (RetryMiddleware gave up on a RETRY_EXCEPTIONS
# error or a RETRY_HTTP_CODES status) are kept as JSON in <spider>:dead for
# `scrapy deadletters list|requeue|purge`. False drops them after the log line.
DEAD_LETTERS_ENABLED = True
# Seeds are read from <spider>:start_urls in batches of this size whenever the
# worker has room, and polled this often (seconds) when the list is empty.
SEED_BATCH_SIZE = 16
SEED_POLL_INTERVAL = 1.0
# Exit (status 0) after this many seconds with nothing to do anywhere in the
# cluster; 0 waits for new seeds forever. Name kept from scrapy-redis.
MAX_IDLE_TIME_BEFORE_CLOSE = int(_env("MAX_IDLE_TIME_BEFORE_CLOSE", "0"))

# --- Item buffer and db_writer -----------------------------------------------
ITEM_PIPELINES = {
    "spiders_project.pipelines.item_buffer.ItemBufferPipeline": 900,
}
# Workers stop fetching while <spider>:items holds more than this many items
# (the db_writer is slow or down), so Redis memory stays bounded; 0 disables.
ITEM_BUFFER_MAX = int(_env("ITEM_BUFFER_MAX", "100000"))
# ... and resume once it is below this fraction of ITEM_BUFFER_MAX.
ITEM_BUFFER_RESUME = 0.8
# The db_writer commits at most this many items per transaction ...
DB_WRITER_BATCH_SIZE = int(_env("DB_WRITER_BATCH_SIZE", "500"))
# ... and waits at most this many seconds to fill a batch before writing it.
DB_WRITER_MAX_WAIT = float(_env("DB_WRITER_MAX_WAIT", "1.0"))

# --- The spider ----------------------------------------------------------------
# Link extraction stays on the seed's host; set 0 for no depth limit.
DEPTH_LIMIT = int(_env("DEPTH_LIMIT", "0"))
CONCURRENT_REQUESTS = int(_env("CONCURRENT_REQUESTS", "32"))
CONCURRENT_REQUESTS_PER_DOMAIN = int(_env("CONCURRENT_REQUESTS_PER_DOMAIN", "16"))
DOWNLOAD_TIMEOUT = int(_env("DOWNLOAD_TIMEOUT", "30"))
ROBOTSTXT_OBEY = _env("ROBOTSTXT_OBEY", "false").lower() in ("1", "true", "yes")
USER_AGENT = _env("USER_AGENT", "spiders_project (+https://example.invalid/bot)")
RETRY_TIMES = int(_env("RETRY_TIMES", "2"))
LOG_LEVEL = _env("LOG_LEVEL", "INFO")

# --- Scrapy behaviour chosen deliberately for production workers ------------
# Each of these is a listening port on every node; workers are operated
# through Redis and the monitor instead.
TELNETCONSOLE_ENABLED = False
REMOTE_CONTROL_ENABLED = False
TWISTED_REACTOR = "twisted.internet.asyncioreactor.AsyncioSelectorReactor"
DOWNLOAD_DELAY_JITTER = 0
EXTENSIONS = {
    "spiders_project.extensions.politeness.ClusterPoliteness": 100,
    "spiders_project.extensions.backpressure.ItemBackpressure": 110,
    "spiders_project.extensions.shutdown.GracefulShutdown": 120,
}
# After a SIGTERM, seconds to finish the requests in flight before handing
# the rest back to the queue and exiting 0 (a second SIGTERM stops at once).
SHUTDOWN_GRACE_PERIOD = float(_env("SHUTDOWN_GRACE_PERIOD", "30"))
FEED_EXPORT_ENCODING = "utf-8"
