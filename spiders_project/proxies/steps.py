"""The proxies' frontier step: a pool proxy is never stored with a request,
in the frontier or in a dead letter (the ``stored`` hook, frontier/steps.py)."""

from __future__ import annotations

from scrapy import Request

from spiders_project.proxies.middleware import forget_proxy


class ForgetProxyStep:
    """Takes the pool proxy and its credentials off a request before it is queued.

    A retry or a link of a page fetched through a pool proxy carries that
    proxy (and its Proxy-Authorization header) in its meta; stored in Redis,
    every worker and ``scrapy deadletters list`` would see the credentials,
    and the request would keep a proxy the pool may have banned since. The
    next worker's ProxyMiddleware picks one afresh.
    """

    def stored(self, request: Request) -> Request:
        return forget_proxy(request)
