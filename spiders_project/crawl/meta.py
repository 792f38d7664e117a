"""Every request-meta key this project defines: who writes it, who reads it.

One module, stdlib-only, so a key is spelled once and anyone can see what
travels with a request. Keys starting with ``_`` are the crawler's own
bookkeeping: a spider never sets them. The others are part of the interface
a spider or a JSON seed may use (docs/SPIDERS.md). Keys defined by Scrapy
(``depth``, ``retry_times``, ``dont_retry``, ``proxy``, ...) and by
scrapy-playwright (``playwright``, ``playwright_*``) are theirs, not listed.

Whether a key is stored with the request in the frontier is said for each:
the frontier stores a request's whole meta as JSON (``frontier/codec/serialize.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from spiders_project.keys import jobs as _jobs

# --- Seeds and their scope -----------------------------------------------------
# True on a seed's request. Written by the seed-reading spider
# (spiders/base.py, make_request_from_seed); read by the frontier, which
# fingerprints a seed even though it is dont_filter. Stored.
SEED = "seed"

# A seed's raw start_urls entry (bytes as latin-1 text). Written by the seed
# reader (spiders/base.py); read (popped) by SeedEntryStep (scope/steps.py),
# which claims the entry in the script that enqueues its request. Never stored.
SEED_ENTRY = "_seed_entry"

# A JSON seed's limits ({"id", "max_pages", "max_depth", "allow", "deny",
# "recrawl_after", "strip_params"}). Written by the seed reader; copied to
# every request crawled from the seed by SeedScope (scope/seed_limits.py);
# read by the URL and seed-limit steps (scope/steps.py) and by SeedBudget.
# Stored.
SCOPE_META = "seed_scope"

# Set once a request was counted against its seed's max_pages. Written by
# SeedBudget (scope/seed_limits.py) and read by it, so a retry is not counted
# twice. Stored (a retry keeps it).
COUNTED = "_seed_counted"

# What a "sitemap": true seed's response is ("sitemap" or "robots"). Written
# by spiders/sitemaps.py and read by it. Stored.
SITEMAP_META = "sitemap_seed"

# The crawl job a request belongs to (a job id, seeds.JOB_ID); absent on the
# requests of the job "default" (seeds.DEFAULT_JOB), so most crawls carry
# nothing. Written by the seed reader (spiders/base.py, make_request_from_seed)
# from a JSON seed's "job"; copied to every request crawled from the seed by
# SeedScope (scope/seed_limits.py), as the seed's limits are, which reads it
# for that; job_of below gives any request's job from it. Stored.
JOB = "crawl_job"

# --- Scope of the network --------------------------------------------------------
# True on a request whose origin must stay public (not a private or loopback
# address). Written by PublicNetworkGuard (scope/networks.py) and SeedScope;
# read by them, by the robots middleware and by the rendering handler. Stored.
GUARDED = "_public_origin"

# --- Retries, bans and dead letters ----------------------------------------------
# Milliseconds the frontier keeps a retry before any worker may fetch it.
# Written by BackoffRetryMiddleware (politeness/retries.py), and by the cookie
# middleware on a request sent back to wait while its jar logs in again
# (cookies/logins.py); read (popped) by RetryWaitStep (politeness/steps.py)
# into the enqueue call. Never stored.
RETRY_WAIT = "_retry_wait_ms"

# Why the last attempt was a block. Written by BackoffRetryMiddleware; read by
# the proxy rotation (proxies/middleware.py). Stored with a retry.
BLOCKED = "_blocked"

# True on a request whose sender handles its failures itself (robots.txt):
# no retry, no dead letter. Written by the robots middleware
# (politeness/robots.py); read by BackoffRetryMiddleware and the dead letters
# (dead_letters/middleware.py). Never stored: a robots.txt request is sent to
# the engine directly, never queued in the frontier.
OWN_FAILURES = "_own_failures"

# --- Leases ----------------------------------------------------------------------------
# When (time.monotonic() of this worker) the lease call that gave this request
# answered: the request was leased in Redis before then. Written by the
# frontier's lease taker (frontier/taking.py) on every leased request; read by
# what must see Redis as it was after the lease (the shared cookie jars,
# cookies/store.py: a jar read that started later sees every jar update that
# travelled with the page this request was found on). Removed by the
# frontier's ``stored`` (frontier/steps.py). Never stored.
LEASED_AT = "_leased_at"

# The frontier shard whose queue gave this request's lease (an int; a sharded
# frontier only: absent on one Redis). Written by the frontier's lease taker
# (frontier/taking.py) with LEASED_AT; read by what writes for the page in the
# transaction of its ack, in that shard's slot (frontier/page_shards.py: the
# item buffer, the page-state entries). Removed by the frontier's ``stored``
# (frontier/steps.py), as LEASED_AT. Never stored.
LEASE_SHARD = "_lease_shard"

# --- Sessions ------------------------------------------------------------------------
# The login a request belongs to: the token of the jar's login under way
# (cookies/sessions.py). Written by the cookie middleware on the requests a
# spider's login() gives (cookies/logins.py) and by LoginChain
# (cookies/chain.py) on the requests a step of that login yields; read by the
# cookie middleware, which lets only the login under way through while the
# jar waits for it, and removes it once the login's answer is judged. Stored
# (a login's requests go through the frontier like any other).
LOGIN = "_login"

# The version of the jar's copy a request went out with (its "~v"), so that
# an expired answer to a request sent before the last login ended is not taken
# for that login failing. Written by the cookie middleware as the request goes
# out, read by it on the answer. Never stored (ForgetCookiesStep, cookies/steps.py).
JAR_VERSION = "_jar_version"

# --- Proxies ------------------------------------------------------------------------
# The proxy a request's jar is pinned to (its name): a session goes out
# through the proxy it was made through while that one is not banned. Written
# by the cookie middleware (cookies/pins.py) before ProxyMiddleware
# (proxies/middleware.py) reads it instead of choosing. Never stored: removed
# by forget_proxy with the rest of the pool's proxy.
PROXY_PIN = "_proxy_pin"

# The name of the pool proxy a request goes through. Written by
# ProxyMiddleware (proxies/middleware.py); read by it and removed, with the
# proxy's credentials, by forget_proxy before the frontier or a dead letter
# stores the request (ForgetProxyStep.stored, proxies/steps.py). Never stored.
PROXY_NAME = "_proxy_name"

# --- Rendering -------------------------------------------------------------------------
# True: render this request in Chromium; False: never render it (wins over
# RENDER_RULES and auto mode). Written by spiders and seeds; read by
# RenderRules (rendering/rules.py), RenderRouting (rendering/queue_choice.py) and
# auto mode (rendering/auto.py). Stored.
RENDER = "render"

# A CSS selector the rendered page must show before it counts as loaded.
# Written by spiders, seeds or RenderRules; read by the rendering handler.
# Stored.
RENDER_WAIT_SELECTOR = "render_wait_selector"

# --- The demo spider -------------------------------------------------------------------
# The host a page of the demo spider belongs to (its links elsewhere are not
# followed). Written by spiders/distributed.py and read by it. Stored.
SPIDER_SCOPE = "scope"

# --- What the URL's last fetch left ---------------------------------------------------
# The state of a revisited URL's last fetch, from its row of the `pages` table:
# {"etag": str | None, "last_modified": str | None, "digest": str | None
# (digests.content_digest of the body the spider saw), "fetched_at": ISO-8601,
# "interval": seconds, "changes": int, "failures": int}. Written by the
# db_writer's revisit scheduler into the revisit requests it pushes back; read
# by the conditional-request middleware (If-None-Match, If-Modified-Since, and
# "unchanged" detection) and by the WARC writer (revisit records). Stored.
PAGE_STATE = "page_state"

# True on a response judged unchanged against PAGE_STATE (a 304, or a 200
# whose content digest equals the last one): its callback is not run and no
# item is written. Written by the conditional-request middleware on the
# response's meta; read by the page-state records and stats. The WARC writer
# sees the response before that middleware does, so it asks the same rule
# (recrawl/unchanged.py) itself rather than reading this key. Never stored.
UNCHANGED = "_unchanged"


def job_of(meta: Mapping[str, Any]) -> str:
    """The job of a request, from its meta (``JOB``; none: the job ``default``)."""
    job = meta.get(JOB)
    return job if isinstance(job, str) else _jobs.DEFAULT_JOB
