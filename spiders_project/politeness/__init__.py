"""Politeness: how the crawl, all workers together, treats a host.

How fast it fetches from the host, what the host's robots.txt allows, when it
asks again after a failure, and when the host is blocking it: an operator
asking "why did this host wait, or not get asked" reads one package.

- ``groups.py``: which requests share one delay and one cap (``POLITENESS_KEY``)?
- ``delays.py``: how long does a host wait between two fetches, and who said so?
- ``steered.py``: what has an operator said about a host at runtime (delay, cap, blocked)?
- ``steps.py``: which group does a request queue under, how long does a retry wait, is it blocked?
- ``turns.py``: may a request of a delayed host leave now (the cluster-wide turn)?
- ``middlewares.py``: what did the site say about pace (``Retry-After``); wait for the turn.
- ``extension.py``: why does no worker's own downloader delay (the cluster does it)?
- ``config.py``: which pacing settings, beyond the delays, does a worker run with?
- ``robots.py``: what may the crawl fetch from a host, and how slowly (robots.txt)?
- ``retries.py``: when is a failed or blocked request asked again (backoff in the frontier)?
- ``bans.py``: is this answer a block rather than a page?

``lua/`` holds their scripts: ``gate.lua`` (turns), ``pause_host.lua``
(``Retry-After``), ``steer_host.lua`` and ``steer_record.lua`` (steering),
``robots.lua`` and ``robots_store.lua`` (robots.txt). The frontier's lease
script (``frontier/lua/lease.lua``) spaces a host's turns by the delays from
here: leasing a request and taking its host's turn are one atomic step, so
that script stays with the frontier's other lease scripts.

robots.txt, retries and bans live here, not in packages of their own,
because each is part of how one host is paced and is bound to the rest:

- a robots.txt ``Crawl-delay`` becomes one of the host's delays
  (``delays.HostPoliteness``);
- a retry waits in its host's later set (``steps.RetryWaitStep``), and a
  ``Retry-After`` answer gets no backoff of its own, as
  ``middlewares.SitePacingMiddleware`` has already paused the whole host;
- a block is how a host says we came too fast or are not welcome:
  ``retries.py`` retries it and ``robots.py`` counts it a failed fetch
  (``proxies`` and ``recrawl`` read the same rules from here).
"""
