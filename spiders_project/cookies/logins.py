"""Logging a jar in again, once for the whole cluster, when the site expires its session.

A spider says how in plain Scrapy terms (docs/SPIDERS.md, "Logins and sessions"):

- ``session_expired(response) -> bool``: the answer says the session is gone
  (a redirect to the login page, a "please log in" page). Asked about every
  answer of a request of a jar (a redirect before it is followed), but the
  answers of a login's steps (below).
- ``login(response) -> Request | iterable of Requests``: the first requests
  of a login, given the expired answer. A request whose callback is
  ``login`` is a step of the login (the login page, whose form ``login`` then
  posts): its answer goes to ``login`` unjudged, and what that yields belongs
  to the login too (``chain.py``). The first answer of the login that is not
  a step ends it: logged in if it is not expired, failed if it is, or is an
  error (a status RETRY_HTTP_CODES does not retry).

What the cluster does (``sessions.py`` holds the rules, ``session_store.py``
runs them in Redis):

- **One login.** Of the answers that find a jar's session expired, the first
  takes the jar's login (its state "run", with a token and a deadline,
  COOKIES_LOGIN_TIMEOUT), keeps that answer's cookies, calls ``login`` and
  sends its requests, marked with the token (``meta.LOGIN``). Another expired
  answer drops its cookies (a site's answer to a session it forgot may set an
  empty one, which would undo the login) and changes nothing.
- **Nothing lost, no slot held.** Every request whose answer was expired,
  and every request of the jar that would go out while the login runs, goes
  back to the frontier with a wait (``LOGIN_POLL_MS`` at most), as a retry
  does: it holds no download slot meanwhile, and when it is leased again it
  goes out with the jar as read after that lease, the new session in it.
- **Causal.** A login that ended well is written behind the cookies of the
  answer that says so, in the same transaction: whoever sees it over sees
  the new session.
- **Bounded.** A failed login, or one past its deadline, counts; an expired
  answer to a request sent before the last login ended does not. After
  COOKIES_LOGIN_ATTEMPTS logins without a page that was not expired, the jar
  is given up: the login's request, and each request of the jar from then
  on, become dead letters with the reason, and nothing is fetched again
  until ``scrapy cookies clear --jar J``.

Only the requests of the crawl, leased from the frontier, take part: a
request the engine downloads itself (robots.txt) is sent as it is, and its
answer's cookies are taken as Scrapy takes them.

Stats: ``cookies/relogins`` (logins started for an expired session),
``cookies/login_waits`` (requests sent back to wait), ``cookies/logins_failed``.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import Any, NoReturn

from scrapy import Request, Spider
from scrapy.exceptions import IgnoreRequest
from scrapy.http import Response
from scrapy.statscollectors import StatsCollector

from spiders_project.config import ConfigError
from spiders_project.cookies.codec import jar_id
from spiders_project.cookies.config import LOGIN_POLL_MS, LoginConfig
from spiders_project.cookies.session_store import SessionStore
from spiders_project.cookies.sessions import FAILED, LOGIN, RUNNING, STALE, Session
from spiders_project.cookies.store import LocalJar, ProcessJars
from spiders_project.crawl import meta
from spiders_project.dead_letters.middleware import DeadLetters

logger = logging.getLogger(__name__)

# What a login's requests take from the request whose answer started it: its
# crawl job (paused and cancelled with it) and its network guard's mark.
_INHERITED = (meta.JOB, meta.GUARDED)

# Takes the cookies of an answer into its jar (the cookie middleware's own code).
Take = Callable[[Request, Response], None]


def logs_in_again(spidercls: type) -> bool:
    """Whether a spider says how to log in again: ``session_expired`` (and then
    ``login`` too, or the worker does not start)."""
    if not callable(getattr(spidercls, "session_expired", None)):
        return False
    if not callable(getattr(spidercls, "login", None)):
        name = getattr(spidercls, "name", spidercls.__name__)
        raise ConfigError(
            f"spider {name} defines session_expired(response) but not login(response): "
            "a spider that logs in again defines both (docs/SPIDERS.md)"
        )
    return True


class Logins:
    """A spider's jars kept logged in (see the module docstring)."""

    def __init__(
        self,
        store: ProcessJars,
        sessions: SessionStore,
        config: LoginConfig,
        stats: StatsCollector,
        letters: DeadLetters,
        *,
        retried: frozenset[int] = frozenset(),
    ) -> None:
        self.store = store
        self.sessions = sessions
        self.config = config
        self.stats = stats
        self.letters = letters
        # RETRY_HTTP_CODES: a login answer with one of these is retried, not judged.
        self.retried = retried
        # Set once the spider is open: its two methods, and the engine's way in.
        self.spider: Any = None
        self.crawl: Callable[[Request], None] | None = None

    def opened(self, spider: Spider, crawl: Callable[[Request], None]) -> None:
        self.spider = spider
        self.crawl = crawl

    # --- a request on its way out ----------------------------------------------------
    async def before_request(
        self, request: Request, local: LocalJar
    ) -> tuple[LocalJar, Request | None]:
        """``request`` about to go out with ``local``: ``(local, None)`` to send it,
        ``(local, later)`` to send ``later`` back to the frontier instead; raises
        IgnoreRequest for a jar given up (a dead letter) or a superseded login."""
        if meta.LEASED_AT not in request.meta:
            return local, None  # the engine's own download (robots.txt): not the crawl's
        session = self.sessions.session(local)
        if session.state == FAILED:
            self._give_up(request, local, session)
        token = request.meta.get(meta.LOGIN)
        if token is not None:
            if session.state != RUNNING or session.token != token:
                self.stats.inc_value("cookies/logins_superseded")
                logger.info("Not sending %s: its login of jar %s is over", request, local.id)
                raise IgnoreRequest(f"its login of jar {local.id} is over")
        else:
            now = self.sessions.now_ms()
            if session.running(now):
                return local, self.later(request, session.until - now)
        request.meta[meta.JAR_VERSION] = local.version
        return local, None

    # --- an answer on its way in -------------------------------------------------------
    async def after_response(
        self, request: Request, response: Response, take: Take
    ) -> Request | Response:
        """The answer to ``request``: the response to hand on, or a request to
        fetch again later; raises IgnoreRequest for a login that failed or a
        jar given up."""
        spider = self.spider
        if response.request is None:
            # The engine ties it to its request only after the middlewares; the
            # spider's two methods read response.meta, as callbacks do.
            response.request = request
        local = self.store.jar(jar_id(request.meta.get("cookiejar")))
        token = request.meta.get(meta.LOGIN)
        if token is not None:
            return await self._login_answer(request, response, take, local, token)
        sent = request.meta.get(meta.JAR_VERSION)
        if sent is None or not spider.session_expired(response):
            take(request, response)
            if sent is not None:
                self.sessions.confirmed(local, sent)
            return response
        new_token = uuid.uuid4().hex[:16]
        outcome = await self.sessions.expired(local, sent=sent, token=new_token)
        if outcome.what == FAILED:
            self._give_up(request, local, outcome.session)
        if outcome.what != LOGIN:
            wait = 0 if outcome.what == STALE else outcome.session.until - self.sessions.now_ms()
            return self.later(request, wait)
        take(request, response)  # the login's own start: the login page's cookies
        self.stats.inc_value("cookies/relogins")
        logger.warning(
            "Session of jar %s expired (%s): logging in again, attempt %d of %d",
            local.id,
            response,
            outcome.session.attempts,
            self.config.attempts,
        )
        await self._start(request, response, local, new_token)
        return self.later(request, LOGIN_POLL_MS)

    async def _login_answer(
        self, request: Request, response: Response, take: Take, local: LocalJar, token: str
    ) -> Request | Response:
        """An answer to a request of the login ``token``: a step, or its end."""
        take(request, response)
        if request.callback == self.spider.login:
            return response  # a step: ``login`` goes on from it
        if response.status in self.retried:
            return response  # retried as a request of the same login
        del request.meta[meta.LOGIN]  # what follows from here is the crawl's again
        if response.status < 400 and not self.spider.session_expired(response):
            self.sessions.ended_ok(local, token)
            logger.info("Jar %s logged in again (%s)", local.id, response)
            return response
        why = "an error" if response.status >= 400 else "still expired"
        reason = f"{response} is {why}"
        await self._failed(request, local, token, reason)
        raise IgnoreRequest(f"login of jar {local.id} failed: {reason}")

    async def _start(
        self, request: Request, response: Response, local: LocalJar, token: str
    ) -> None:
        """Send the requests of the spider's ``login``, marked as the login ``token``."""
        try:
            given = self.spider.login(response)
            requests = [given] if isinstance(given, Request) else list(given or ())
        except Exception as exc:  # noqa: BLE001 - the spider's error ends this login
            logger.exception("Spider %s: login() failed", self.spider.name)
            await self._failed(None, local, token, f"login() raised {type(exc).__name__}")
            return
        if not requests or not all(isinstance(r, Request) for r in requests):
            await self._failed(None, local, token, "login() gave no request")
            return
        assert self.crawl is not None
        for login in requests:
            login.meta[meta.LOGIN] = token
            login.dont_filter = True  # the login page again, as often as it takes
            if jar_id(login.meta.get("cookiejar")) != local.id:
                login.meta["cookiejar"] = request.meta.get("cookiejar")
            for key in _INHERITED:
                if key in request.meta and key not in login.meta:
                    login.meta[key] = request.meta[key]
            self.crawl(login)

    async def _failed(
        self, request: Request | None, local: LocalJar, token: str, reason: str
    ) -> None:
        """The login ``token`` failed: counted; the last one the jar may try
        gives the jar up, ``request`` a dead letter with the reason."""
        self.stats.inc_value("cookies/logins_failed")
        outcome = await self.sessions.ended_failed(local, token, reason)
        if outcome.what == FAILED:
            logger.error("Jar %s given up: %s", local.id, outcome.session.reason)
            if request is not None:
                self.letters.dead_letter(request, outcome.session.reason)
        else:
            logger.warning("Login of jar %s failed: %s", local.id, reason)

    # --- helpers -----------------------------------------------------------------------
    def later(self, request: Request, wait_ms: int) -> Request:
        """``request`` again, back to the frontier for ``wait_ms`` (at most
        ``LOGIN_POLL_MS``): fetched again, never lost, holding no slot meanwhile."""
        again = request.replace(dont_filter=True)
        again.meta[meta.RETRY_WAIT] = max(0, min(int(wait_ms), LOGIN_POLL_MS))
        again.meta.pop(meta.JAR_VERSION, None)
        self.stats.inc_value("cookies/login_waits")
        return again

    def _give_up(self, request: Request, local: LocalJar, session: Session) -> NoReturn:
        why = f"session of jar {local.id} could not be restored: {session.reason}"
        self.letters.dead_letter(request, why)
        raise IgnoreRequest(why)
