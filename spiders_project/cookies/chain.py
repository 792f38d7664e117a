"""The requests a step of a login yields belong to that login, as Scrapy's
DepthMiddleware gives a page's links their depth.

A step of a login is an answer whose callback is the spider's ``login``
(the login page, whose form it posts: ``logins.py``); its request carries the
login's token (``meta.LOGIN``), which this spider middleware gives to every
request the step yields for the same jar. The cookie middleware then lets
them out while the jar waits for its login, and judges the first answer that
is not a step.
"""

from __future__ import annotations

from scrapy import Request
from scrapy.crawler import Crawler
from scrapy.exceptions import NotConfigured
from scrapy.http import Response
from scrapy.spidermiddlewares.base import BaseSpiderMiddleware

from spiders_project.cookies.codec import jar_id
from spiders_project.cookies.config import CookiesConfig
from spiders_project.cookies.logins import logs_in_again
from spiders_project.crawl.meta import LOGIN


class LoginChain(BaseSpiderMiddleware):
    """Spider middleware; off unless the spider logs in again (``session_expired``)."""

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> LoginChain:
        if not CookiesConfig.from_settings(crawler.settings).enabled:
            raise NotConfigured
        if not logs_in_again(crawler.spidercls):
            raise NotConfigured  # no message: Scrapy would log it for every spider
        return cls(crawler)

    def get_processed_request(self, request: Request, response: Response | None) -> Request:
        if response is None:
            return request
        token = response.meta.get(LOGIN)
        if token is None or LOGIN in request.meta:
            return request
        if jar_id(request.meta.get("cookiejar")) == jar_id(response.meta.get("cookiejar")):
            request.meta[LOGIN] = token
            request.dont_filter = True  # the login's form again, as often as it takes
        return request
