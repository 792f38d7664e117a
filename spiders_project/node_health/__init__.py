"""A worker that cannot reach the sites the cluster reaches takes itself out of the crawl.

A node whose own network is broken (a firewall rule, a dead route, a full
conntrack table) still reaches Redis, so it keeps leasing: every fetch fails,
and each failure spends one of the URL's retries, until URLs become dead
letters that a healthy node would have fetched. Here a worker watches its own
fetches (``middleware.py``), compares them with the other workers' fetches
of the same requests (``verdict.py``), and when only it fails, it stops fetching, hands its leases
back, and probes until it can connect again. Settings: ``NODE_*``
(docs/SETTINGS.md).
"""
