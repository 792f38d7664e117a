"""Every setting of the project, declared once, with its default.

Values that differ between deployments come from environment variables
(REDIS_URL, DB_URL, ...); every name here can still be overridden on the
command line with ``scrapy crawl distributed -s NAME=VALUE``. This module is
two things at once: the defaults ``spiders_project.Addon`` gives any Scrapy
project that names it in ADDONS (every setting below but the project's own
names of the first section and ADDONS), and this checkout's own project
settings, which use the add-on like any other project (the last section).
The db_writer and the monitor start from the settings of the project they
run in, with the same defaults, so a default never lives twice.
"""

import os
from typing import Any

# Scrapy's project names: where `scrapy crawl` finds spiders, `scrapy
# genspider` writes new ones, and our commands (crawlstatus, deadletters, ...) live.
BOT_NAME = "spiders_project"
SPIDER_MODULES = ["spiders_project.spiders"]
NEWSPIDER_MODULE = "spiders_project.spiders"
COMMANDS_MODULE = "spiders_project.commands"


# The names every _env call below reads: where one is also a setting's name,
# the add-on ranks that variable, when set, above a project's own settings.py
# (spiders_project/addon/defaults.py).
environment_names: set[str] = set()


def _env(name: str, default: Any) -> Any:
    """The environment's text for ``name`` if set, else ``default``.

    Never parsed here: a setting is parsed where it is read, by a typed
    config (``spiders_project.config.SettingsReader``) or Scrapy's typed
    getters, so a bad value gives one line naming it, not an import traceback.
    """
    environment_names.add(name)
    return os.environ.get(name, default)


# --- Connections -------------------------------------------------------------
# The shared Redis of the cluster. rediss:// and redis://:password@host work.
REDIS_URL = _env("REDIS_URL", "redis://localhost:6379/0")
# Where the db_writer stores items, spelled as SQLAlchemy spells URLs:
# sqlite:///relative.db, sqlite:////abs/path.db, postgresql://user@host/db.
DB_URL = _env("DB_URL", "sqlite:///data/items.db")
# Seconds to wait for Redis to answer before a call counts as failed.
REDIS_SOCKET_TIMEOUT = _env("REDIS_SOCKET_TIMEOUT", 10.0)
# Redis Sentinel: "host:port,host:port" of the sentinels, and the name of the
# master they watch. Set, every process asks them for the master (and again
# after a failover); REDIS_URL then gives only the db number, the master's
# user and password, and with rediss:// TLS to the master and its ssl_* options.
REDIS_SENTINELS = _env("REDIS_SENTINELS", "")
REDIS_SENTINEL_MASTER = _env("REDIS_SENTINEL_MASTER", "mymaster")
# Redis Sentinel: the user and password of the sentinels themselves (their own
# requirepass or ACL user, not the master's: that one is in REDIS_URL). Empty:
# none. Never logged.
REDIS_SENTINEL_USERNAME = _env("REDIS_SENTINEL_USERNAME", "")
REDIS_SENTINEL_PASSWORD = _env("REDIS_SENTINEL_PASSWORD", "")
# Redis Sentinel: speak TLS to the sentinels. "auto": when REDIS_URL is
# rediss:// (TLS to the master), "true" or "false" to choose. The sentinels'
# TLS takes REDIS_URL's ssl_* query parameters (ssl_ca_certs, ssl_certfile,
# ssl_keyfile, ssl_cert_reqs, ssl_check_hostname, ...), and
# REDIS_SENTINEL_SSL_OPTIONS, in the same query form
# ("ssl_ca_certs=/etc/crawler/sentinel-ca.crt&ssl_certfile=..."), overrides
# any of them for the sentinels only (docs/SECURITY.md).
REDIS_SENTINEL_TLS = _env("REDIS_SENTINEL_TLS", "auto")
REDIS_SENTINEL_SSL_OPTIONS = _env("REDIS_SENTINEL_SSL_OPTIONS", "")
# Redis Cluster: true when REDIS_URL is a node of a cluster (any node: the
# others are asked of it). Every key then carries its spider's hash tag,
# "{<spider>}:..." (the seed list too: "{distributed}:start_urls"), so each
# script and transaction touches one slot (docs/SCALING.md).
REDIS_CLUSTER = _env("REDIS_CLUSTER", "false")
# Redis Cluster: the frontier split into this many shards by host, each in a
# slot of its own ("auto": one per master, counted when the spider's first
# worker starts; recorded in {<spider>}:frontier:shards, and a worker told
# another count refuses to start). Always 1 on a single Redis.
FRONTIER_SHARDS = _env("FRONTIER_SHARDS", "auto")
# Writes that must not be lost (enqueue, ack, items) are confirmed with WAIT
# by this many replicas before a worker counts them done; unconfirmed within
# REDIS_WAIT_TIMEOUT seconds, they are sent again. A master that never had a
# replica online is waited for by nothing (a single Redis keeps working); one
# that had replicas waits for them even after it lost them (a master cut off
# by a partition takes writes it later throws away: docs/SCALING.md, "A
# partition"). 0: no WAIT. Costs one round trip a write tick (docs/BENCHMARKS.md).
REDIS_WAIT_REPLICAS = _env("REDIS_WAIT_REPLICAS", 1)
REDIS_WAIT_TIMEOUT = _env("REDIS_WAIT_TIMEOUT", 1.0)
# Reconnect backoff: first wait and cap, in seconds (doubles each failure).
REDIS_RECONNECT_BACKOFF = 0.2
REDIS_RECONNECT_BACKOFF_MAX = 5.0
# Passwords of the four Redis users `scrapy redis-acl` writes into the ACL file
# (as SHA-256 hashes), one per role: crawler-worker (HTTP and render workers),
# crawler-db-writer, crawler-monitor (reads only) and crawler-operator (seeding
# and the commands). Needed only where the file is generated: each process
# logs in with the user and password of its own REDIS_URL
# (redis://crawler-worker:<password>@host:6379/0). Empty: redis-acl refuses to
# write the file (docs/SECURITY.md, "Redis users").
REDIS_ACL_WORKER_PASSWORD = _env("REDIS_ACL_WORKER_PASSWORD", "")
REDIS_ACL_DB_WRITER_PASSWORD = _env("REDIS_ACL_DB_WRITER_PASSWORD", "")
REDIS_ACL_MONITOR_PASSWORD = _env("REDIS_ACL_MONITOR_PASSWORD", "")
REDIS_ACL_OPERATOR_PASSWORD = _env("REDIS_ACL_OPERATOR_PASSWORD", "")
# The servers' own users, added to the file only when set: crawler-replica, the
# user a replica logs in to its master as (masteruser/masterauth; PSYNC,
# REPLCONF, PING only), and crawler-sentinel, the sentinels' user on the servers
# they watch (sentinel auth-user/auth-pass; no key). Empty: not in the file.
REDIS_ACL_REPLICA_PASSWORD = _env("REDIS_ACL_REPLICA_PASSWORD", "")
REDIS_ACL_SENTINEL_PASSWORD = _env("REDIS_ACL_SENTINEL_PASSWORD", "")

# --- The frontier (scheduler, queue, dupefilter) -----------------------------
# scrapy-redis' Scheduler, subclassed so its Redis I/O never blocks the reactor.
SCHEDULER = "spiders_project.frontier.scheduler.FrontierScheduler"
DUPEFILTER_CLASS = "spiders_project.frontier.dupefilter.FingerprintDupeFilter"
SCHEDULER_QUEUE_CLASS = "spiders_project.frontier.queue.JsonPriorityQueue"
# JSON, never pickle: nothing read from Redis is ever unpickled.
SCHEDULER_SERIALIZER = "spiders_project.frontier.codec.serialize"
# The shared seen-set (frontier/seen.py). "exact": about 10 bytes of Redis per
# URL, a false "seen" for about n / 2^73 of new URLs (1e-13 at 10^9). "bloom": a Bloom filter
# sized for DUPEFILTER_CAPACITY URLs, which wrongly skips DUPEFILTER_ERROR_RATE
# of new URLs once full (more beyond) and takes its memory up front
# (-ln(rate) / ln(2)^2 bits per URL of capacity: 42 MB for 10^7 at 1e-7).
# Every worker of a spider must use the same mode (the first one records it).
DUPEFILTER_MODE = _env("DUPEFILTER_MODE", "exact")
DUPEFILTER_CAPACITY = _env("DUPEFILTER_CAPACITY", 10_000_000)
DUPEFILTER_ERROR_RATE = _env("DUPEFILTER_ERROR_RATE", 1e-7)
# Seconds after which a URL seen before is enqueued again when it is found
# again or seeded again (its row in the database is updated); 0: never. Needs
# DUPEFILTER_MODE=exact, which then keeps each URL's time (about 14 bytes a
# URL) and must be on from the crawl's start. A seed's "recrawl_after" wins
# for the pages of that seed.
RECRAWL_AFTER = _env("RECRAWL_AFTER", 0.0)
# True: each URL's revisit interval adapts to how often it changes (Nutch's
# AdaptiveFetchSchedule): RECRAWL_AFTER is its first interval (needed), a
# change multiplies it by 1 - RECRAWL_DEC_RATE, a fetch that found no change
# by 1 + RECRAWL_INC_RATE, within RECRAWL_MIN_INTERVAL and RECRAWL_MAX_INTERVAL
# (seconds). The db_writer computes it, in the `pages` table (docs/ARCHIVE.md, Recrawls).
RECRAWL_ADAPTIVE = _env("RECRAWL_ADAPTIVE", False)
# How much shorter an adaptive interval gets after a change (0.2: 20%).
RECRAWL_DEC_RATE = _env("RECRAWL_DEC_RATE", 0.2)
# How much longer an adaptive interval gets after a fetch that found no change.
RECRAWL_INC_RATE = _env("RECRAWL_INC_RATE", 0.4)
# The shortest adaptive interval (seconds): a page changing at every visit is
# fetched no more often than this.
RECRAWL_MIN_INTERVAL = _env("RECRAWL_MIN_INTERVAL", 60.0)
# The longest adaptive interval (seconds, 30 days): a page that never changes
# is still looked at this often.
RECRAWL_MAX_INTERVAL = _env("RECRAWL_MAX_INTERVAL", 2592000.0)
# False (the default): only a URL's revisit (its row's due time in the
# db_writer's `pages` table, sent with its validators) and seeds fetch it
# again, so every refetch is conditional, links do not cut adaptive intervals
# short, and no URL is fetched twice around its due time. True: a link to a
# URL enqueued longer ago than RECRAWL_AFTER also enqueues it again, as a plain
# fetch (the timed seen-set, as before the `pages` table).
RECRAWL_LINKS = _env("RECRAWL_LINKS", False)
# True: every fetch leaves its URL's row in the db_writer's `pages` table
# (status, validators, content digest, outcome, due time), one small entry
# through the item buffer per fetch. On by itself with RECRAWL_AFTER set:
# revisits read their due URLs and validators from that table.
PAGES_ENABLED = _env("PAGES_ENABLED", False)
# Seconds between the db_writer's looks for due rows of `pages` (with
# RECRAWL_AFTER set), and the most rows one look pushes back to
# <spider>:start_urls as revisits: 500 a second keeps the seed list short
# while workers keep up, and one look's transaction short.
RECRAWL_SCHEDULE_EVERY = 1.0
RECRAWL_SCHEDULE_BATCH = 500
# Item classes (scrapy.Item, dataclass or attrs) that requests may carry in
# meta or cb_kwargs, as dotted paths, besides those found in the modules of
# SPIDER_MODULES. Only these classes are ever rebuilt from a frontier entry
# (spiders_project/frontier/codec/values.py); any other value is refused at
# enqueue and kept in <spider>:requests:unserializable.
ITEM_CLASSES: list[str] = []
# Which of the frontier's queues this worker takes requests from. Requests
# that will render go to a render queue of their own (same hosts' turns,
# leases and dead letters): "http" never leases them, "render" leases only
# them (a pool of browser workers), "all" both. Sizing: docs/OPERATIONS.md.
WORKER_ROLE = _env("WORKER_ROLE", "all")
# Crawl state is shared by the cluster: a stopping worker never flushes it.
SCHEDULER_PERSIST = True
SCHEDULER_FLUSH_ON_START = False
# Pending writes (new requests, items, acks) are sent in one pipeline at most
# this often, in seconds. Larger batches cost Redis less CPU a page (each
# script call has a fixed cost: docs/BENCHMARKS.md compares 0.2 with 0.05),
# and items that would pass ITEM_BUFFER_MAX go at once whatever the tick, as
# does the slot of a lease that filled its host's cap (RedisBatcher.release),
# so a capped host's slots still pass between workers at once.
FRONTIER_FLUSH_INTERVAL = 0.2
# Requests a worker leases beyond its free download slots. 0 keeps leases to
# what it can start at once, which politeness needs (a lease is a turn).
FRONTIER_PREFETCH = 0
# Spare leases: requests of hosts at their cluster-wide cap
# (CONCURRENT_REQUESTS_PER_DOMAIN; hosts without delay) a worker leases beyond
# its slots, all hosts together. They hold no slot: when one of the worker's
# downloads of their host ends, its slot passes to a spare at once, with no
# round trip to Redis (which hears of it in the next write tick); with none in
# hand, the slot waits for the next lease call's spares (one round trip at
# most). A worker keeps only its share of a host other workers wait for.
# Without them each slot sits empty for two round trips, which far from Redis
# costs a large share of the pages/s (docs/BENCHMARKS.md, Distance). Up to
# twice a host's cap of one host (frontier/spares.py says why two).
# A killed worker's spares are fetched again too, like its other leases; 0: none.
FRONTIER_SPARES = 32
# Seconds a worker with nothing leasable waits before asking Redis again
# (less when the ready-set says when the next host's turn comes).
FRONTIER_EMPTY_POLL_INTERVAL = 0.25
# Fingerprints of links this worker already sent to the shared dupefilter,
# kept in memory (about 100 bytes each) so a repeated link is dropped without
# being encoded and sent to Redis; 0 sends every link to Redis.
# The rule that keeps it safe: the cache never outlives what Redis knows. It
# is emptied whenever the worker reconnects to Redis and whenever Redis'
# run_id changes (a restart, a failover), because such a Redis may have lost
# fingerprints it had acknowledged (appendfsync everysec, a lagging replica),
# and a link found in the cache is never sent again (stat
# frontier/seen_cache_cleared).
FRONTIER_SEEN_CACHE = 100_000
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
DOWNLOAD_DELAY = _env("DOWNLOAD_DELAY", 0.0)
# What one delay and one cap apply to: host (host[:port], the default), domain
# (its registrable domain, from the Public Suffix List bundled with tldextract)
# or ip (the address it resolves to, kept 5 minutes). Queues, turns, caps and
# pauses are kept per group.
POLITENESS_KEY = _env("POLITENESS_KEY", "host")
# The Public Suffix List Scrapy's cookie middleware decides with whether a
# cookie's Domain is a public suffix (a cookie for all of "co.uk" is refused):
# "" the snapshot bundled with tldextract, or the path of a list file
# (public_suffix_list.dat) the operator keeps up to date. Never fetched from
# the internet; a file that cannot be read stops the worker at start.
COOKIES_PUBLIC_SUFFIX_LIST = _env("COOKIES_PUBLIC_SUFFIX_LIST", "")
# Per-host overrides, {"host[:port]": seconds}, a host named as hosts.host_of
# names it: lower-case, punycode for IDN, without the scheme's default port
# (other spellings are converted).
HOST_DOWNLOAD_DELAYS: dict[str, float] = {}
# Seconds between two reads of the hosts an operator steers at runtime
# (scrapy frontier host: delays and blocks; one HGETALL of a small hash): a
# change reaches every worker within this plus one round trip, so the 2 s the
# operator is promised need 1.5 at most (0.05 to 1.5).
HOST_STEERING_INTERVAL = 1.0
# Added to every non-zero delay by the dispatch gate (seconds): absorbs the
# time between a granted turn and the request reaching the wire (20 ms seen
# with three workers on two cores).
POLITENESS_GUARD = 0.03
# Added on top of POLITENESS_GUARD to the spacing of rendered navigations
# (seconds): after its turn, a navigation still crosses Node, Chromium and
# scrapy-playwright's route handler before it reaches the wire (the time it
# takes: docs/BENCHMARKS.md, "Figures moved out of code comments").
NAVIGATION_GUARD = 0.05
# Retry-After of a 429/503 answer pauses its host for that long, capped here.
RETRY_AFTER_MAX = 600.0
# A retry (5xx, timeout, connection error, 429 without Retry-After, a block)
# waits in the shared frontier RETRY_BACKOFF_BASE x 2^(attempt-1) seconds,
# plus up to 25% jitter, capped at RETRY_BACKOFF_MAX; no worker fetches it
# earlier and it holds no download slot meanwhile (politeness/retries.py).
RETRY_BACKOFF_BASE = _env("RETRY_BACKOFF_BASE", 2.0)
RETRY_BACKOFF_MAX = _env("RETRY_BACKOFF_MAX", 300.0)
# Blocks are not content: an answer with one of these statuses, or whose text
# matches one of these regexes, is a failed attempt (retried with backoff,
# then a dead letter with the reason), never an item; through a proxy it bans
# the proxy. On the command line: -s 'BAN_BODY_PATTERNS=["captcha", "Access denied"]'.
BAN_HTTP_CODES = _env("BAN_HTTP_CODES", [403, 429])
BAN_BODY_PATTERNS: list[str] = _env("BAN_BODY_PATTERNS", [])

# --- One URL, one fetch; traps --------------------------------------------------
# Query parameters dropped from every link before it is fingerprinted (a
# trailing * matches a prefix); a JSON seed's "strip_params": false keeps them
# for what is crawled from it. The scheme's default port is dropped and the
# host lower-cased and punycoded too (spiders_project/scope/urls.py).
URL_STRIP_PARAMS = _env("URL_STRIP_PARAMS", ["utm_*", "gclid", "fbclid", "mc_cid", "mc_eid"])
# Links longer than this are not followed (0: no limit) ...
URL_MAX_LENGTH = _env("URL_MAX_LENGTH", 2083)
# ... nor links whose path repeats one segment more than this many times
# (/a/b/a/b/a/b/a/b: relative links resolved against themselves); 0: no limit.
URL_MAX_REPEATED_SEGMENTS = _env("URL_MAX_REPEATED_SEGMENTS", 3)

# --- Proxies -----------------------------------------------------------------------
# Proxy URLs requests go through, comma-separated (http://user:pass@host:port),
# or a file with one per line (# comments); none: requests go direct.
# Credentials are never logged or stored (spiders_project/proxies/).
PROXIES = _env("PROXIES", "")
PROXIES_FILE = _env("PROXIES_FILE", "")
# rotate: the next proxy for every request; host: one proxy per politeness
# group, moving only while it is banned.
PROXY_MODE = _env("PROXY_MODE", "rotate")
# A proxy a site blocked (BAN_HTTP_CODES, BAN_BODY_PATTERNS), or whose
# connections failed PROXY_MAX_FAILURES times in a row, is not used by any
# worker for this many seconds.
PROXY_BAN_TIME = _env("PROXY_BAN_TIME", 300.0)
PROXY_MAX_FAILURES = 3
# Seconds between a worker's reads of the cluster's proxy bans.
PROXY_REFRESH_INTERVAL = 1.0

# --- Cookies -------------------------------------------------------------------------
# Scrapy's COOKIES_ENABLED (true) and COOKIES_DEBUG keep their meaning; with
# COOKIES_DEBUG the worker logs the names of the cookies it sends and gets,
# never their values. True: the spider's default jar and each
# meta["cookiejar"] jar live in Redis (cookies:<spider>:jar:<jar>), so every
# worker sends and updates the same cookies, and the links of a page go out
# with the cookies that page set (spiders_project/cookies/). False: each
# worker keeps its own jars, as plain Scrapy does.
COOKIES_SHARED = _env("COOKIES_SHARED", True)
# Seconds after its last update or use that a shared jar (a session) is
# deleted from Redis.
COOKIES_JAR_TTL = _env("COOKIES_JAR_TTL", 86400.0)
# A spider that defines session_expired(response) and login(response) is
# logged in again when the site expires its session (docs/SPIDERS.md, "Logins
# and sessions"): one worker of the cluster logs the jar in while the jar's
# other requests wait in the frontier, holding no download slot. A login not
# over after this many seconds (its requests lost, a worker killed) counts as
# failed, and the next expired answer starts another.
COOKIES_LOGIN_TIMEOUT = _env("COOKIES_LOGIN_TIMEOUT", 60.0)
# Logins of a jar that may fail, or leave its session expired, before a page
# confirms it: past this, the login and every request of the jar become dead
# letters with the reason, until `scrapy cookies clear --jar J`.
COOKIES_LOGIN_ATTEMPTS = _env("COOKIES_LOGIN_ATTEMPTS", 3)

# --- No crossing from public to private networks ---------------------------------
# A request reached from a public address (a link or redirect on a page that
# came from one) is refused when it would connect to a loopback, private,
# link-local, shared or reserved address; checked on the address actually
# connected to (spiders_project/scope/networks.py). Seeds on such addresses,
# and what is crawled from them, are allowed. True turns the guard off.
ALLOW_PRIVATE_NETWORKS = _env("ALLOW_PRIVATE_NETWORKS", False)
# Networks (CIDR) the guard treats as public anyway: your own ranges.
NETWORK_GUARD_PUBLIC: list[str] = []
# The resolver that refuses a public page's link to a private address, so a
# name that resolves inward (or rebinds) is caught on the address connected to.
TWISTED_DNS_RESOLVER = "spiders_project.scope.networks.GuardedResolver"

# --- Dead letters ----------------------------------------------------------------
# Requests that failed for good (RetryMiddleware gave up on a RETRY_EXCEPTIONS
# error or a RETRY_HTTP_CODES status) are kept as JSON in <spider>:dead for
# `scrapy deadletters list|requeue|purge`. False drops them after the log line.
DEAD_LETTERS_ENABLED = True

# --- Node health -----------------------------------------------------------------
# A worker whose own network is broken (it reaches Redis but no site) takes
# itself out of the crawl instead of failing every URL it leases: after
# NODE_FAILURES fetches in a row failed with a network error (no connection, no
# name, no answer in time; a render timeout is not one),
# or NODE_FAILURE_WINDOW seconds of nothing but such failures (at least 3), or
# a request's last attempt failing after another failure, it stops fetching
# while the other workers fetch what it failed, and reads their published
# stats. If they get answers, it hands its leases back, fetches nothing, and
# tries to connect to the last sites that failed every NODE_PROBE_INTERVAL
# seconds until one answers (stat node/cut_off, metric crawler_worker_cut_off);
# if they fail too, the sites are down and it goes on. Requests that fail on
# such a node are queued again without using a retry, so none becomes a dead
# letter. With no other worker publishing stats there is nobody to compare with,
# and failures are ordinary attempts (spiders_project/node_health/).
NODE_HEALTH_ENABLED = True
NODE_FAILURES = 50
NODE_FAILURE_WINDOW = 30.0
NODE_PROBE_INTERVAL = 5.0

# --- Seeds ---------------------------------------------------------------------
# Seeds are read from <spider>:start_urls in batches of this size whenever the
# worker has room, and polled this often (seconds) when the list is empty.
SEED_BATCH_SIZE = 16
SEED_POLL_INTERVAL = 1.0
# Each poll reads the oldest SEED_BATCH_SIZE x SEED_SPREAD seeds and takes
# SEED_BATCH_SIZE of them at random, so workers polling together mostly claim
# different seeds and intake grows with their number; 1 makes every worker
# race for the same oldest seeds.
SEED_SPREAD = 8
# Exit (status 0) after this many seconds with nothing to do anywhere in the
# cluster; 0 waits for new seeds forever. Name kept from scrapy-redis.
MAX_IDLE_TIME_BEFORE_CLOSE = _env("MAX_IDLE_TIME_BEFORE_CLOSE", 0)

# --- Item buffer and db_writer -----------------------------------------------
# The fields that identify an item of a type, {"ProductItem": ["sku"]}: its row
# in the database is (spider, item_type, item_key). A type without an entry is
# identified by its page's request fingerprint and its position among that
# page's items of the same type. The bundled PageItem is one row per URL.
ITEM_KEYS: dict[str, list[str]] = {"PageItem": ["url"]}
# An item type's own table, {"ProductItem": "products"}, with the columns of
# `items`; the rest go to `items`. Read by the db_writer.
ITEM_TABLES: dict[str, str] = {}
# Workers stop fetching while <spider>:items holds more than this many items
# (the db_writer is slow or down), so Redis memory stays bounded; 0 disables.
ITEM_BUFFER_MAX = _env("ITEM_BUFFER_MAX", 100_000)
# ... and resume once it is below this fraction of ITEM_BUFFER_MAX.
ITEM_BUFFER_RESUME = 0.8
# Seconds between looks at the buffer's length while fetching (it also rides
# on every write transaction), and while paused (an LLEN each time).
ITEM_BUFFER_CHECK_INTERVAL = 0.2
ITEM_BUFFER_PAUSED_CHECK_INTERVAL = 1.0
# The db_writer commits at most this many items per transaction (4000: page
# entries 69,000-72,000/s into SQLite against 56,000-59,000 at 1000, items and
# PostgreSQL a few percent faster, docs/BENCHMARKS.md; a crash rewrites at most
# one batch) ...
DB_WRITER_BATCH_SIZE = _env("DB_WRITER_BATCH_SIZE", 4000)
# ... and waits at most this many seconds to fill a batch before writing it.
DB_WRITER_MAX_WAIT = _env("DB_WRITER_MAX_WAIT", 1.0)
# Longest single wait for the buffer to fill, in seconds: an idle writer makes
# one blocking call this often, so it notices stop requests and keeps its lock
# fresh without spinning.
DB_WRITER_IDLE_WAIT = 1.0
# Retry backoff after a database error: first wait and cap, in seconds
# (doubles each failure). Redis has its own, REDIS_RECONNECT_BACKOFF(_MAX).
DB_WRITER_RETRY_BACKOFF = 0.5
DB_WRITER_RETRY_BACKOFF_MAX = 30.0
# Seconds within which a dead db_writer's batch in hand is taken over by
# another writer (or its successor). Any number of writers drain a spider's
# buffer at once; each renews its lease at every batch and every sixth of
# this when idle or retrying, and the lease lives half of this, so only a
# writer that is dead (or stuck that long) loses it. Another writer, looking
# every fifth of this between its own batches, then takes over its batch:
# 0.7 times this after a crash, plus the batch it was writing (a clean stop
# drops the lease at once).
DB_WRITER_LOCK_TTL = 10.0
# With --all-spiders, seconds between looks for spiders whose workers started
# buffering items (the set "spiders"); each gets its own writer thread.
DB_WRITER_SPIDERS_POLL = 5.0

# --- The spider ----------------------------------------------------------------
# Link extraction stays on the seed's host; set 0 for no depth limit.
DEPTH_LIMIT = _env("DEPTH_LIMIT", 0)
# Downloads in flight per worker (each holds a lease).
CONCURRENT_REQUESTS = _env("CONCURRENT_REQUESTS", 32)
# Downloads in flight from one host (politeness group) by the whole cluster,
# not per worker: a slot comes back when its download ends, a killed worker's
# with its leases.
CONCURRENT_REQUESTS_PER_DOMAIN = _env("CONCURRENT_REQUESTS_PER_DOMAIN", 16)
# Outputs (items and requests) of one response processed in parallel. Scrapy
# 2.19 starts this many asyncio tasks for every response whatever it yields;
# its default of 100 cost a third of a worker's CPU (docs/BENCHMARKS.md), and
# our pipelines never wait, so a few are plenty.
CONCURRENT_ITEMS = 16
# Seconds a download may take before it fails (and is retried), Scrapy's.
DOWNLOAD_TIMEOUT = _env("DOWNLOAD_TIMEOUT", 30)
# robots.txt is obeyed, as in Scrapy's project template. Each origin's file is
# fetched by one worker and shared in <spider>:robots:<origin> for
# ROBOTSTXT_TTL seconds (a failed fetch, or a 5xx, allows all for
# ROBOTSTXT_ERROR_TTL); its Crawl-delay spaces the host's fetches
# cluster-wide (politeness/robots.py).
ROBOTSTXT_OBEY = _env("ROBOTSTXT_OBEY", True)
ROBOTSTXT_TTL = _env("ROBOTSTXT_TTL", 86400.0)
ROBOTSTXT_ERROR_TTL = 300.0
# Sent with every request, and matched against robots.txt: name your crawler
# and give a URL or address where sites can reach you.
USER_AGENT = _env("USER_AGENT", "spiders_project (+https://example.invalid/bot)")
# Retries of a failed download (network error, 5xx, timeout, a block) before
# it is a dead letter; each waits its backoff (RETRY_BACKOFF_BASE).
RETRY_TIMES = _env("RETRY_TIMES", 2)
# Log level of every program: workers, db_writer, monitor.
LOG_LEVEL = _env("LOG_LEVEL", "INFO")

# --- Rendering -------------------------------------------------------------------
# scrapy-playwright's browser: Chromium, the one make setup installs.
PLAYWRIGHT_BROWSER_TYPE = "chromium"
# How Chromium is started (CHROMIUM_PATH picks the binary).
PLAYWRIGHT_LAUNCH_OPTIONS = {
    # Debian's chromium-headless-shell package (make setup): the same Chromium
    # without the desktop browser around it, as Playwright's own headless mode
    # uses; never a `playwright install` download. About 0.06 CPU-s less per
    # page and 170 MB PSS less per worker than Debian's full chromium
    # (docs/BENCHMARKS.md); CHROMIUM_PATH=/usr/bin/chromium uses that one.
    "executable_path": _env("CHROMIUM_PATH", "/usr/lib/chromium/chromium-headless-shell"),
    "headless": True,
    # Chromium's sandbox does not run as root: sandboxed unless we are root.
    "chromium_sandbox": os.geteuid() != 0,
    "args": [
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--disable-gpu",
        "--mute-audio",
        # Containers often give /dev/shm 64 MB, which crashes renderers.
        "--disable-dev-shm-usage",
        # The GPU process's work (software compositing) done in the browser
        # process: one process less. (--renderer-process-limit=1 would save
        # about 90 MB PSS more, but a page spinning in a script then stalls every
        # page of its site in the worker: tests/e2e/test_rendering_crawl.py.)
        "--in-process-gpu",
    ],
}
# NODE_OPTIONS for Playwright's Node driver (set in the worker's environment
# when the driver starts, unless NODE_OPTIONS is set already): a 1 MB young
# generation instead of 16 MB takes about 30 MB off its RSS. "" leaves Node's default.
RENDER_DRIVER_NODE_OPTIONS = "--max-semi-space-size=1"
# Scrapy's own list of errors that are retried, extended just below.
from scrapy.settings.default_settings import RETRY_EXCEPTIONS as _SCRAPY_RETRY  # noqa: E402

# Playwright errors (timeouts, a crashed page, a dead browser) and our own
# RenderError are retried like network errors, and become dead letters when
# the retries are used up.
RETRY_EXCEPTIONS = [
    *_SCRAPY_RETRY,
    "playwright.async_api.TimeoutError",
    "playwright.async_api.Error",
    "spiders_project.rendering.errors.RenderError",
]
# Off: nothing renders; requests that ask to are fetched over plain HTTP
# (one warning, stat render/disabled). Only for crawls where nothing renders:
# a worker with it off fetches the rendering requests it leases unrendered.
RENDER_ENABLED = True
# URLs that render whatever their meta says (unless "render": false): a list
# of regexes, or {regex: CSS selector to wait for, or null}. On the command
# line as JSON: -s 'RENDER_URL_PATTERNS={"^https://shop\\.example/p/": "#price"}'.
RENDER_URL_PATTERNS: list[str] | dict[str, str | None] = []
# "rules": a request renders when its meta or RENDER_URL_PATTERNS say so.
# "auto": besides those, every page is fetched over HTTP first and rendered
# only when it needs JavaScript: RENDER_AUTO_RULES' selector for its URL finds
# nothing, or (by default) it looks script-built (an empty app root, a
# <noscript> asking for JavaScript, almost no text). Learned per site section
# for the whole cluster: after RENDER_AUTO_LEARN pages of a section needed
# rendering (and half of those checked), its pages render directly.
RENDER_MODE = _env("RENDER_MODE", "rules")
# {URL regex: CSS selector its HTTP response must match}, e.g.
# -s 'RENDER_AUTO_RULES={"/product/": "#price"}'.
RENDER_AUTO_RULES: dict[str, str] = {}
# Pages of a site section that needed rendering (half of them checked) before
# RENDER_MODE=auto renders that section's pages directly, for the whole cluster.
RENDER_AUTO_LEARN = 5
# Navigation ends at this event: commit, domcontentloaded, load or networkidle.
RENDER_WAIT_UNTIL = "load"
# Seconds a navigation, and then a wait for render_wait_selector, may each take.
# Beyond it the attempt fails with Playwright's TimeoutError (retried).
RENDER_TIMEOUT = 30.0
# Then, seconds to wait for the network to go idle (500 ms without requests),
# so content that scripts fetch is there; a page still busy after it is taken
# as it is (stat render/idle_timeout). 0 skips it. A selector replaces this wait.
RENDER_IDLE_TIMEOUT = 5.0
# Hard limit (seconds) on one attempt, for the hangs Playwright's own timeouts
# miss. Must exceed RENDER_TIMEOUT + max(RENDER_TIMEOUT, RENDER_IDLE_TIMEOUT);
# a cancelled attempt fails with RenderTimeout (retried).
RENDER_DEADLINE = 90.0
# Pages rendering at once per worker; the rest wait in RenderMiddleware, before
# their host's turn is granted. A page costs 0.12 to 0.15 CPU-s but mostly waits
# on the network; at 4 a worker with its browser takes about 0.5 GB (PSS;
# docs/BENCHMARKS.md), and one such worker per core is the sizing of
# docs/OPERATIONS.md ("Sizing the HTTP and render pools"). Plain HTTP is
# capped by CONCURRENT_REQUESTS only.
RENDER_CONCURRENCY = _env("RENDER_CONCURRENCY", 4)
# Bounded memory: a browser context is closed and replaced after this many
# pages, and Chromium restarted after this many (when its pages are done).
RENDER_PAGES_PER_CONTEXT = 100
RENDER_PAGES_PER_BROWSER = 1000
# ... and Chromium restarted, once its pages in flight are done, when the RSS of
# its processes (summed, under Playwright's driver) exceeds this many MB (0: never;
# about 900 MB at RENDER_CONCURRENCY=4 on the benchmark's pages) ...
RENDER_MAX_RSS_MB = _env("RENDER_MAX_RSS_MB", 2048)
# ... or when its recent pages take this many times longer to render than the
# worker's running average (pages/s fallen to a quarter at 4); 0: never.
RENDER_SLOWDOWN_FACTOR = 4.0
# A page renders up to this many URLs, navigated from one to the next, before
# it is closed (1: a new page per URL). Reuse spares Chromium a renderer
# process start per URL, a good share of a page's CPU (rendering/page_pool.py;
# docs/BENCHMARKS.md, Rendering) ...
RENDER_URLS_PER_PAGE = 20
# ... and a page left unused this many seconds is closed (its last document's
# scripts run, and may fetch, while it waits) ...
RENDER_IDLE_PAGE_CLOSE = 5.0
# ... and a reused page's renderer runs a full garbage collection before its
# next URL: about 110 MB PSS less at RENDER_CONCURRENCY=4 (docs/BENCHMARKS.md).
RENDER_GC_BETWEEN_URLS = True
# Sub-requests of rendered pages aborted in the browser: these Playwright
# resource types ([] blocks none; fonts are not even requested: Chromium is
# started with a switch that leaves them unloaded, rendering/blocking.py) ...
RENDER_BLOCK_RESOURCE_TYPES = ["image", "font", "media"]
# ... and these hosts with their subdomains (trackers and ad servers).
RENDER_BLOCK_DOMAINS = [
    "google-analytics.com",
    "googletagmanager.com",
    "googlesyndication.com",
    "googleadservices.com",
    "doubleclick.net",
    "facebook.net",
    "connect.facebook.com",
    "hotjar.com",
    "scorecardresearch.com",
    "quantserve.com",
    "segment.io",
    "mixpanel.com",
    "nr-data.net",
    "clarity.ms",
    "criteo.com",
    "taboola.com",
    "outbrain.com",
    "adnxs.com",
    "amazon-adsystem.com",
]
# Chromium loads no image at all (not even requested, which saves some CPU a
# page: docs/BENCHMARKS.md, Rendering), but an image then fires
# neither "load" nor "error", and scripts that wait for images wait forever.
# Off: blocked images are requested and aborted, and fire "error".
RENDER_IMAGES_UNLOADED = False
# A page in flight when Chromium dies is retried at once on the relaunched
# browser this many times (not counted in RETRY_TIMES), then fails with
# BrowserCrashed, which RetryMiddleware retries as usual.
RENDER_CRASH_RETRIES = 2

# --- Scrapy behaviour chosen deliberately for production workers ------------
# Each of these is a listening port on every node; workers are operated
# through Redis and the monitor instead.
TELNETCONSOLE_ENABLED = False
REMOTE_CONTROL_ENABLED = False
# The asyncio reactor, which scrapy-playwright and our asyncio Redis client need.
TWISTED_REACTOR = "twisted.internet.asyncioreactor.AsyncioSelectorReactor"
# Scrapy's per-worker random delay factor: the frontier spaces a host's
# fetches cluster-wide, and ClusterPoliteness zeroes the per-worker delay.
DOWNLOAD_DELAY_JITTER = 0
# After a SIGTERM, seconds to finish the requests in flight before handing
# the rest back to the queue and exiting 0 (a second SIGTERM stops at once).
SHUTDOWN_GRACE_PERIOD = _env("SHUTDOWN_GRACE_PERIOD", 30.0)
# `scrapy crawl -o` feeds in UTF-8, not \u-escaped.
FEED_EXPORT_ENCODING = "utf-8"
# Once the spider is open, the objects built at start-up (about 150,000) are
# frozen out of the garbage collector's full passes, which walked them all every
# time: about 5% of a worker's CPU a page (spiders_project.worker.gc_freeze).
WORKER_GC_FREEZE = _env("WORKER_GC_FREEZE", True)

# --- Jobs --------------------------------------------------------------------------
# Every worker looks at the jobs' schedules (`scrapy jobs schedule`) this often
# (seconds) and runs the ticks that are due; each tick runs once for the whole
# cluster, whichever worker gets it first. Off: this worker runs none.
JOBS_SCHEDULES_ENABLED = True
JOBS_SCHEDULE_INTERVAL = 1.0
# The stream <spider>:jobs:events (a job submitted, ...) is trimmed to about
# this many entries (XADD MAXLEN ~).
JOBS_EVENTS_MAX = 10_000
# Tests only: a file holding the time (ms since the epoch) the schedules run
# at, read at every look, so a test steps the workers' clock. "": Redis' clock.
JOBS_SCHEDULE_TEST_CLOCK = ""
# Seconds between two reads of the paused and cancelled jobs (one HGETALL of
# a small hash): a worker holds back a paused job's requests within this plus
# one round trip, so the 2 s the operator is promised need 1.5 at most.
JOBS_STATE_INTERVAL = 1.0
# A running job is finished once nothing of it has been queued, backing off,
# leased or in flight for this many seconds (and no seed of it waits in
# start_urls). The workers look every third of it (at most 5 s), and a monitor
# given CONSOLE_REDIS_URL when none is left.
JOB_FINISH_GRACE = _env("JOB_FINISH_GRACE", 30.0)
# A running job with requests queued (backing off included) that fetched no
# page for this many seconds gets one "stalled" event per stall; keep it the
# `for` of the alert CrawlerJobStalled (10m, deploy/prometheus/alerts.yml).
JOB_STALL_AFTER = 600.0
# Job webhooks: every job event (running, paused, cancelled, finished, stalled)
# POSTed as JSON to each of these URLs (a list; comma-separated in the
# environment), once for the whole cluster; "" sends none (docs/OPERATIONS.md).
JOB_WEBHOOK_URLS = _env("JOB_WEBHOOK_URLS", "")
# Signs every POST: X-Crawler-Signature: sha256=<hex HMAC-SHA256 of the body>.
# Required once JOB_WEBHOOK_URLS is set.
JOB_WEBHOOK_SECRET = _env("JOB_WEBHOOK_SECRET", "")
# Seconds one POST may take, connecting included; less than the first retry delay.
JOB_WEBHOOK_TIMEOUT = 5.0
# A POST that failed (no 2xx in time) is tried again after this many seconds,
# doubling each try up to the second value ...
JOB_WEBHOOK_RETRY_DELAY = 10.0
JOB_WEBHOOK_RETRY_MAX_DELAY = 300.0
# ... until its event is this many seconds old: then it is dropped, with one
# log line and webhooks/dropped (crawler_errors_total{kind="webhook_dropped"}).
JOB_WEBHOOK_MAX_AGE = 3600.0

# --- Archive (WARC) ---------------------------------------------------------------
# Every fetch (request, response as received, revisits, rendered DOM) written as
# WARC 1.1 files by each worker, one gzip member per record (docs/ARCHIVE.md).
WARC_ENABLED = _env("WARC_ENABLED", False)
# Where this worker's WARC files go (created if missing); workers of one node may
# share it: each writes its own files, and recovers only those of dead workers.
WARC_DIR = _env("WARC_DIR", "data/warc")
# Bytes after which a file is closed (renamed without .open) and the next one
# opened; at least 65536. 1 GB, Heritrix's and the WARC guidelines' size.
WARC_MAX_SIZE = _env("WARC_MAX_SIZE", 1_000_000_000)
# First part of every file name: <prefix>-<UTC timestamp>-<serial>-<worker>.warc.gz.
WARC_PREFIX = _env("WARC_PREFIX", "crawl")
# A record that cannot be written (a full disk, an I/O error): "pause" stops
# fetching (leased requests go back to the queue) and tries again every
# WARC_RETRY_INTERVAL seconds until it is written, as a page fetched and not
# archived counts as lost; "continue" drops that fetch's records (stat
# warc/records_dropped) and goes on, archiving again once writes work.
WARC_ON_ERROR = _env("WARC_ON_ERROR", "pause")
WARC_RETRY_INTERVAL = 5.0
# Fetches waiting for the writer thread before fetching pauses until half are
# written (never blocking the reactor): a few MB for pages of some KB.
WARC_QUEUE_SIZE = 1000

# --- Monitoring ------------------------------------------------------------------
# Each worker publishes its Scrapy stats, a heartbeat and its share of the
# spider's all-time counters to Redis this often (seconds), in one Lua call
# (spiders_project.worker.heartbeat).
STATS_PUBLISH_ENABLED = True
STATS_PUBLISH_INTERVAL = 5.0
# A worker counts as alive while its heartbeat key lives: this many seconds
# after its last publish. Keep it a few intervals long.
STATS_HEARTBEAT_TTL = 15.0
# A worker that stopped publishing without signing off (killed, crashed, node
# down) stays listed this many seconds (crawler_worker_up 0, its last counters),
# then is forgotten. A worker that stops cleanly leaves the list at once.
STATS_WORKER_RETENTION = 900.0
# Seconds of (time, pages total) samples kept for pages/s in `scrapy crawlstatus`
# (its longest --window).
STATS_SAMPLES_RETENTION = 300.0
# The console's chart of pages/s over the last hour reads coarser samples,
# which outlive a restart of the monitor: one every STATS_HISTORY_INTERVAL
# seconds for the whole cluster (the first worker to publish once it has
# passed adds it), kept STATS_HISTORY_RETENTION seconds; about 60 members.
STATS_HISTORY_INTERVAL = 60.0
STATS_HISTORY_RETENTION = 3600.0
# python -m monitor, the Prometheus exporter: address of its /metrics endpoint ...
MONITOR_HOST = _env("MONITOR_HOST", "127.0.0.1")
MONITOR_PORT = _env("MONITOR_PORT", 9410)
# ... the spiders it reports on (a list; comma-separated in the environment) ...
MONITOR_SPIDERS = _env("MONITOR_SPIDERS", "distributed")
# ... and the longest a scrape waits for Redis (seconds) before it answers
# with crawler_redis_up 0 instead; keep it below Prometheus' scrape_timeout.
MONITOR_REDIS_TIMEOUT = 2.0

# --- Console (python -m monitor) ---------------------------------------------------
# An htpasswd file of bcrypt entries ("user:hash" lines, as htpasswd -B writes
# them): with one, python -m monitor serves the operators' console at / beside
# /metrics, on MONITOR_HOST:MONITOR_PORT; "" for none (only /metrics).
CONSOLE_HTPASSWD = _env("CONSOLE_HTPASSWD", "")
# The users of that file who may act (pause, resume, cancel and submit jobs, steer
# hosts, requeue or purge dead letters); a list, comma-separated in the environment.
# Every other user of the file may only look.
CONSOLE_OPERATORS = _env("CONSOLE_OPERATORS", "")
# The Redis URL the console acts through, a user with the operator's rights
# (crawler-operator of scrapy redis-acl); "" leaves the console read-only for
# everyone. The monitor also finishes jobs through it when no worker is left to
# (docs/OPERATIONS.md, "Who finishes jobs"), with or without the console. The
# monitor's own connection (REDIS_URL) only ever reads.
CONSOLE_REDIS_URL = _env("CONSOLE_REDIS_URL", "")
# The path a reverse proxy serves the console under (e.g. /crawler), which the
# proxy strips before passing a request on; the console's links and its cookie
# carry it. "" when the console is served at the root (docs/SECURITY.md).
CONSOLE_PREFIX = _env("CONSOLE_PREFIX", "")
# Seconds a session lives without a request; then its user logs in again.
# Sessions live in the monitor's memory: a restart logs everyone out.
CONSOLE_SESSION_IDLE = 28_800.0
# Failed logins allowed per user name, and per client address, within
# CONSOLE_LOGIN_WINDOW seconds; past that, logins of that user or from that
# address are refused (HTTP 429) until the window has passed.
CONSOLE_LOGIN_ATTEMPTS = 5
CONSOLE_LOGIN_WINDOW = 900.0
# The hosts page ranks the busiest hosts of the whole frontier from a sweep the
# monitor runs in the background over every host's queue sizes (ZSCAN of the
# ready-sets, about 7 reads a host), at most this many hosts a second: a pass
# over 100,000 hosts then takes 50 s, and costs Redis about 14,000 pipelined
# reads a second while it runs (docs/OPERATIONS.md, "Console").
CONSOLE_HOST_SWEEP_RATE = 2000.0

# --- The worker's components -------------------------------------------------------
# The add-on that makes a Scrapy project's crawl a worker of the cluster: the
# scheduler, dupefilter and reactor among the defaults above, and the cluster's
# component lists (spiders_project/addon/components.py) merged into this
# project's DOWNLOADER_MIDDLEWARES, SPIDER_MIDDLEWARES, ITEM_PIPELINES,
# EXTENSIONS and DOWNLOAD_HANDLERS (and a spider's custom_settings): a project
# or spider adds to them, and switches one off by naming it with None, but
# never replaces them. docs/ARCHITECTURE.md ("The worker's components") lists
# the merged lists; docs/SPIDERS.md ("Your own project") the same line in
# another project.
ADDONS = {"spiders_project.Addon": 0}
# Frontier steps of your own, {dotted path: order}, merged over the cluster's
# FRONTIER_STEPS_BASE as Scrapy merges DOWNLOADER_MIDDLEWARES over its base; a
# path set to None switches a step off (frontier/steps.py says what a step may do).
FRONTIER_STEPS: dict[str, int | None] = {}
