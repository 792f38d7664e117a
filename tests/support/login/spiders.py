"""The example spider of docs/SPIDERS.md ("Logins and sessions"): a login written as
in plain Scrapy, run on the cluster.

``scrapy crawl login -s SPIDER_MODULES=tests.support.login.spiders``, seeded
with the site's login page (``login:start_urls``). A JSON seed with
``"meta": {"cookiejar": "bob", "user": "bob"}`` logs in as another user in a
jar of its own. Nothing here knows about the cluster: Scrapy's
CookiesMiddleware keeps the session, and on the cluster its jars are shared by
every worker, so whichever worker fetches a link sends the session the
login set. ``session_expired`` and ``login`` say how to log in again when the
site ends the session; plain Scrapy never calls them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit

from scrapy import FormRequest, Request
from scrapy.http import Response

from spiders_project.spiders import RedisSpider
from tests.support.login.site import PASSWORDS


class LoginSpider(RedisSpider):
    name = "login"

    def parse(self, response: Response) -> Iterator[Any]:
        """A seed: the login page. Post its form, CSRF token and all."""
        yield self._post(response, self.parse_page)

    def parse_page(self, response: Response) -> Iterator[Any]:
        """A page behind the login (the login's redirect first): an item, and its links."""
        yield {"url": response.url, "user": response.css("#user::text").get()}
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href, self.parse_page, meta=self._session(response))

    def session_expired(self, response: Response) -> bool:
        """The site sends a request whose session it no longer knows to its login page."""
        location = response.headers.get("Location", b"").decode()
        return response.status in (301, 302, 303, 307, 308) and urlsplit(location).path == "/login"

    def login(self, response: Response) -> Request:
        """Log in again: post the login page's form, asking for the page first
        (with ``login`` as its callback) when ``response`` is not it."""
        if not response.css("form[action='/login']"):
            return Request(response.urljoin("/login"), self.login, meta=self._session(response))
        return self._post(response, self.logged_in)

    def logged_in(self, response: Response) -> Iterator[Any]:
        """Logged in again: the pages that waited are fetched again by themselves."""
        return iter(())

    def _post(self, response: Response, then: Callable[[Response], Any]) -> FormRequest:
        user = response.meta.get("user", "alice")
        return FormRequest.from_response(
            response,
            formdata={"username": user, "password": PASSWORDS[user]},
            callback=then,
            meta=self._session(response),
        )

    def _session(self, response: Response) -> dict[str, Any]:
        """The jar (and user) to keep using: Scrapy's ``cookiejar`` is not passed on by itself."""
        return {key: response.meta[key] for key in ("cookiejar", "user") if key in response.meta}


# What a member page needs to show its content: Chromium, and its script done.
RENDER = {"playwright": True, "render_wait_selector": "#done"}


class RenderedLoginSpider(LoginSpider):
    """The same login (``FormRequest.from_response``, over plain HTTP), and the
    member pages it reaches rendered by Chromium: the site's ``js=True`` pages
    only show their content once their script ran. Scrapy-playwright's own
    ``"playwright": true``; nothing about cookies."""

    name = "login_rendered"

    def parse(self, response: Response) -> Iterator[Any]:
        """The login form, posted over HTTP; in the browser when the seed's meta
        says ``"render_login": true`` (the form's cookie given to the browser, the
        session it gets taken back)."""
        for request in super().parse(response):
            if response.meta.get("render_login"):
                request.meta["playwright"] = True  # its answer, /home, is a plain page
            yield request

    def parse_page(self, response: Response) -> Iterator[Any]:
        yield {"url": response.url, "user": response.css("#user::text").get()}
        for href in response.css("a::attr(href)").getall():
            meta = {**self._session(response), **RENDER}
            yield response.follow(href, self.parse_page, meta=meta)
