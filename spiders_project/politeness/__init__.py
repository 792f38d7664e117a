"""Politeness: how fast the cluster, all workers together, may fetch from one host.

Everything that paces a host lives here, so an operator looking for "why did
this host wait" reads one package:

- ``delays.py``: the delay of each host (``DOWNLOAD_DELAY``,
  ``HOST_DOWNLOAD_DELAYS``, and what the site asked for). The frontier's lease
  script (``frontier/lua/lease.lua``) spaces a host's turns by it: leasing a
  request and taking the host's turn must be one atomic step, so that script
  stays with the frontier's other lease scripts and takes its delays from here.
- ``turns.py`` and ``lua/gate.lua``: the dispatch gate, the cluster-wide turn
  granted right before a request leaves a worker (``POLITENESS_GUARD``), and
  before a browser navigates (``NAVIGATION_GUARD``).
- ``middlewares.py`` and ``lua/pause_host.lua``: what sites say about pace,
  ``Retry-After`` (``RETRY_AFTER_MAX``) and robots.txt ``Crawl-delay``, and
  the downloader middleware that waits for the gate.
- ``extension.py``: turns off each worker's own download delay, which the
  cluster enforces instead.
- ``steered.py``, ``lua/steer_host.lua``, ``lua/steer_record.lua`` and
  ``steps.BlockedHostStep``: what an operator says about one host at runtime
  (``scrapy frontier host``: its delay, its cap, blocked), read by every
  worker each second; the cap and the delay by the lease script too.
"""
