"""Requests through a pool of proxies, with bans shared by the cluster (``middleware``)."""
