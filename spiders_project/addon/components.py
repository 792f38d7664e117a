"""The cluster's components: one ordered list per Scrapy component setting, in one place.

``spiders_project.Addon`` merges each dict here into the setting of the same
name of whatever project it runs in (``BaseSettings.setdefault_in_component_priority_dict``),
so a project's or a spider's own ``DOWNLOADER_MIDDLEWARES`` (and the others)
add to these and may switch one off by naming it with ``None``; they never
replace the list. Each dict is one literal, written in its order, with a
comment per entry; docs/ARCHITECTURE.md ("The worker's components") shows
each merged list, Scrapy's components included, and
tests/unit/test_components.py compares the two.
"""

from collections.abc import Mapping

# What happens to a request on its way into the frontier and after a worker
# leases it: the steps the scheduler runs, {dotted path: order}, lowest order
# first, as Scrapy builds its middlewares. A project's FRONTIER_STEPS is merged
# over this base, as Scrapy merges DOWNLOADER_MIDDLEWARES over its own
# DOWNLOADER_MIDDLEWARES_BASE (a path set to None switches a step off), so the
# add-on sets this one as a default. The scheduler itself knows none of them
# (frontier/steps.py says what a step may do).
FRONTIER_STEPS_BASE = {
    # A seed's start_urls entry, claimed by the enqueue script; first: later steps ask "a seed?".
    "spiders_project.scope.steps.SeedEntryStep": 100,
    # One URL, one fetch: normalised (URL_STRIP_PARAMS), traps dropped; before steps read the URL.
    "spiders_project.scope.steps.UrlRulesStep": 200,
    # A seed's own recrawl_after; after SeedEntryStep, whose mark tells a seed it may reject.
    "spiders_project.scope.steps.SeedLimitsStep": 300,
    # A pool proxy's name and credentials never stored; its `stored` hook runs before any `admit`.
    "spiders_project.proxies.steps.ForgetProxyStep": 400,
    # A Cookie header (a session) never stored; a `stored` hook, as ForgetProxyStep's.
    "spiders_project.cookies.steps.ForgetCookiesStep": 450,
    # A retry waits out its backoff in the frontier; reads only its own meta key.
    "spiders_project.politeness.steps.RetryWaitStep": 500,
    # Requests that render go to the render queue; a `route` hook, after the dedup pre-filter.
    "spiders_project.rendering.steps.RenderRouteStep": 600,
    # The politeness group a request queues under, and its delay; a later step's group_of wins.
    "spiders_project.politeness.steps.PolitenessKeyStep": 700,
    # Hosts an operator blocked: neither queued nor fetched; their group is the normalised URL's.
    "spiders_project.politeness.steps.BlockedHostStep": 800,
    # A paused job's leased requests back to their queue, a cancelled job's dropped; last.
    "spiders_project.jobs.pause_step.JobStep": 900,
}
# The downloader middlewares, merged over Scrapy's DOWNLOADER_MIDDLEWARES_BASE
# (the comments name Scrapy's with their orders): a request passes them from the
# lowest order up to the download handler, its response or exception from the
# highest down. No two share an order, ours or Scrapy's, so no place depends on
# a dict's order (tests/unit/test_components.py). A component whose feature is
# off raises NotConfigured, so no entry here depends on the environment.
DOWNLOADER_MIDDLEWARES = {
    # Scrapy's RobotsTxtMiddleware (100), off: ClusterRobotsTxt takes its order.
    "scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware": None,
    # robots.txt once per cluster (ROBOTSTXT_OBEY); early, as Scrapy's: a refusal costs nothing.
    "spiders_project.politeness.robots.ClusterRobotsTxt": 100,
    # Dead letters (DEAD_LETTERS_ENABLED); just under the retries: sees what they gave up on.
    "spiders_project.dead_letters.middleware.DeadLetterMiddleware": 540,
    # Scrapy's RetryMiddleware (550), off: BackoffRetryMiddleware takes its order.
    "scrapy.downloadermiddlewares.retry.RetryMiddleware": None,
    # Retries with backoff through the frontier, blocks retried too; Scrapy's order.
    "spiders_project.politeness.retries.BackoffRetryMiddleware": 550,
    # A 429/503's Retry-After pauses its host cluster-wide; sees each answer before the retries.
    "spiders_project.politeness.middlewares.SitePacingMiddleware": 560,
    # A seed's max_pages, counted cluster-wide; before HostGate (990): no turn when over budget.
    "spiders_project.scope.seed_limits.SeedBudget": 565,
    # Which requests render, each holding a render slot; before HostGate (990).
    "spiders_project.rendering.rules.RenderMiddleware": 570,
    # RENDER_MODE=auto: JS pages to the render queue; back after Redirect, before MetaRefresh (580).
    "spiders_project.rendering.auto.AutoRenderMiddleware": 582,
    # Page states, revisits (PAGES_ENABLED); back after HttpCompression (590), before the retries.
    "spiders_project.recrawl.middleware.PageStateMiddleware": 585,
    # Node health (NODE_HEALTH_ENABLED); back before HttpCompression (590) may refuse an answer.
    "spiders_project.node_health.middleware.NodeHealthMiddleware": 595,
    # A 3xx's page-state entry, written before Redirect (600) follows it.
    "spiders_project.recrawl.middleware.RedirectStateMiddleware": 605,
    # No public-to-private crossing; back before Redirect (600), so a redirect keeps the mark.
    "spiders_project.scope.networks.NetworkGuardMiddleware": 650,
    # Scrapy's CookiesMiddleware (700), off: SharedCookiesMiddleware takes its order.
    "scrapy.downloadermiddlewares.cookies.CookiesMiddleware": None,
    # Cookie jars shared by the cluster (COOKIES_SHARED), Scrapy's own code on them; Scrapy's order.
    "spiders_project.cookies.middleware.SharedCookiesMiddleware": 700,
    # A pool proxy per request (PROXIES); after Cookies (700), before HttpProxy (750) reads it.
    "spiders_project.proxies.middleware.ProxyMiddleware": 710,
    # Every fetch to WARC (WARC_ENABLED); out after all headers are set, back before any decoding.
    "spiders_project.archive.middleware.ArchiveMiddleware": 910,
    # The host's cluster-wide turn, granted last so the site sees the delay.
    "spiders_project.politeness.middlewares.HostGateMiddleware": 990,
    # After the turn: a request of a job paused or cancelled during its wait does not start.
    "spiders_project.jobs.fetch_gate.JobGate": 995,
}
# How each scheme is downloaded, merged over Scrapy's DOWNLOAD_HANDLERS_BASE
# (a scheme the project names keeps the project's handler).
# JavaScript pages render in Debian's Chromium through scrapy-playwright, in the
# same worker; every other request goes over plain HTTP (docs/RENDERING.md).
# A request renders when its meta says "render": true (carried to the links
# followed from it on the same host; a seed's "playwright": true means the same)
# or its URL matches RENDER_URL_PATTERNS; "render": false never renders.
# One handler instance serves both schemes; Playwright's driver and Chromium
# start with the first page that renders, so HTTP-only workers never pay for them.
DOWNLOAD_HANDLERS = {
    # Scrapy's HTTP11DownloadHandler for plain requests, Playwright for those that render.
    "http": "spiders_project.rendering.handler.RenderingDownloadHandler",
    # The same instance as http's.
    "https": "spiders_project.rendering.handler.RenderingDownloadHandler",
}
# The spider middlewares, merged over Scrapy's SPIDER_MIDDLEWARES_BASE: a
# response passes them from the lowest order up to the spider, what the spider
# yields from the highest down to the engine.
SPIDER_MIDDLEWARES = {
    # Numbers each page's items in the order yielded; lowest: sees what every other one kept.
    "spiders_project.item_buffer.identity.PagePositions": 10,
    # A seed's limits and the network guard's mark on a page's links; out after Depth (900).
    "spiders_project.scope.seed_limits.SeedScope": 850,
    # A login's steps give their requests the login's mark (a spider that logs in again only).
    "spiders_project.cookies.chain.LoginChain": 870,
}
# None of ours: a project's own ITEM_PIPELINES run as in plain Scrapy. Every
# item they keep goes to <spider>:items once all of them are done with it
# (ItemBuffer, an extension on item_scraped), with its identity: item_type
# (its class name) and item_key (ITEM_KEYS).
ITEM_PIPELINES: dict[str, int] = {}
# Our extensions, merged over Scrapy's EXTENSIONS_BASE (all at 0, so built
# first), in the order they are built: each one's handlers of a signal are
# called before those of the extensions after it. InternalsCheck and JobWebhooks
# rely on their places; the others' handlers do not depend on one another.
EXTENSIONS = {
    # First: refuse to run if a Scrapy/Playwright internal we use is missing.
    "spiders_project.insides.check.InternalsCheck": 50,
    # Each worker's download delay zeroed once the engine starts: the frontier spaces hosts.
    "spiders_project.politeness.extension.ClusterPoliteness": 100,
    # Pauses fetching while <spider>:items is over ITEM_BUFFER_MAX (0: off).
    "spiders_project.item_buffer.backpressure.ItemBackpressure": 110,
    # Items to <spider>:items after every item pipeline (item_scraped).
    "spiders_project.item_buffer.buffer.ItemBuffer": 115,
    # A SIGTERM's drain bounded by SHUTDOWN_GRACE_PERIOD, then leases handed back.
    "spiders_project.worker.shutdown.GracefulShutdown": 120,
    # Start-up's objects out of the garbage collector's full passes (WORKER_GC_FREEZE).
    "spiders_project.worker.gc_freeze.FreezeStartup": 122,
    # Job webhooks (JOB_WEBHOOK_URLS); before StatsPublisher, so its loop stops on
    # spider_closed before the last stats publish and the Redis clients' close.
    "spiders_project.jobs.webhook_extension.JobWebhooks": 125,
    # Heartbeat and stats in Redis for the monitor (STATS_PUBLISH_ENABLED).
    "spiders_project.worker.heartbeat.StatsPublisher": 130,
    # Runs the jobs' schedules (JOBS_SCHEDULES_ENABLED).
    "spiders_project.jobs.schedules.JobSchedules": 140,
    # Paused and cancelled jobs, and jobs that finished.
    "spiders_project.jobs.state_loop.JobWatch": 150,
}

# Each ordered list above by the setting it is merged into, in the order
# docs/ARCHITECTURE.md shows them. FRONTIER_STEPS_BASE is not here: it is a
# base, set as a default, which a project's FRONTIER_STEPS adds to.
ORDERED: dict[str, Mapping[str, int | None]] = {
    "DOWNLOADER_MIDDLEWARES": DOWNLOADER_MIDDLEWARES,
    "SPIDER_MIDDLEWARES": SPIDER_MIDDLEWARES,
    "ITEM_PIPELINES": ITEM_PIPELINES,
    "EXTENSIONS": EXTENSIONS,
}
