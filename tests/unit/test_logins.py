"""Logging in again: the session rules on a worker's own jars, and the cookie
middleware's way through an expired session, a login and a jar given up
(``COOKIES_SHARED=False``: the same rules as Redis', tests/integration/test_logins.py)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from scrapy import FormRequest, Request, Spider
from scrapy.exceptions import IgnoreRequest
from scrapy.http import HtmlResponse, Response
from scrapy.statscollectors import MemoryStatsCollector
from scrapy.utils.test import get_crawler

from spiders_project.config import ConfigError
from spiders_project.cookies import codec
from spiders_project.cookies.chain import LoginChain
from spiders_project.cookies.config import LOGIN_POLL_MS, LoginConfig
from spiders_project.cookies.logins import Logins, logs_in_again
from spiders_project.cookies.middleware import SharedCookiesMiddleware
from spiders_project.cookies.session_store import LocalSessions
from spiders_project.cookies.sessions import FAILED, OK, RUNNING, Session
from spiders_project.cookies.steps import ForgetCookiesStep
from spiders_project.cookies.store import ProcessJars
from spiders_project.crawl import meta
from spiders_project.dead_letters.middleware import DeadLetters
from tests.support.login import session_cases
from tests.support.login.session_cases import ATTEMPTS, CASES, TIMEOUT_MS, Harness

SITE = "http://shop.example"
CONFIG = LoginConfig(timeout=TIMEOUT_MS / 1000, attempts=ATTEMPTS)


# --- the rules, on this worker's own jars ------------------------------------------------
def local_harness() -> Harness:
    store = ProcessJars()
    now = [session_cases.T0]
    sessions = LocalSessions(CONFIG, clock=lambda: now[0] / 1000)
    local = store.jar("default")

    def set_now(ms: int) -> None:
        now[0] = ms

    async def settle() -> Any:
        return local

    async def set_cookie(name: str, via: str | None) -> None:
        before = codec.snapshot(local.cookies)
        response = Response(f"{SITE}/", headers={"Set-Cookie": f"{name}=1; Path=/"})
        local.cookies.extract_cookies(response, Request(f"{SITE}/"))
        store.changed(local, before, via)

    async def cookie_names() -> set[str]:
        return {cookie.name for cookie in local.cookies}

    return Harness(sessions, local, set_now, settle, set_cookie, cookie_names)


@pytest.mark.parametrize("case", CASES, ids=[case.__name__ for case in CASES])
def test_the_session_rules_on_a_workers_own_jars(case):
    asyncio.run(case(local_harness()))


@pytest.mark.parametrize(
    "raw", [None, "", "[]", "{}", '{"s": "sleeping"}', "not json", b'{"s": 1}']
)
def test_a_login_field_that_is_not_ours_reads_as_a_fresh_session(raw):
    assert Session.loads(raw) == Session()


def test_a_session_reads_back_as_it_was_written_and_cjsons_numbers_too():
    session = Session(RUNNING, 2, 1_700_000_000_123, "ab", 1_700_000_010_123, "")
    assert Session.loads(session.dumps()) == session
    # What Redis' cjson writes: every number as a double, printed without a fraction.
    assert Session.loads('{"s":"fail","n":3,"v":17.0,"t":"","u":0,"r":"why"}') == Session(
        FAILED, 3, 17, "", 0, "why"
    )


# --- the middleware ------------------------------------------------------------------------
class SiteSpider(Spider):
    """The site sends an expired session to /login; its login form posts to /login."""

    name = "site"

    def session_expired(self, response: Response) -> bool:
        return response.status == 302 and response.headers.get("Location") == b"/login"

    def login(self, response: Response) -> Request:
        if b"<form" not in response.body:
            return Request(f"{SITE}/login", self.login)
        return FormRequest(f"{SITE}/login", formdata={"u": "alice"}, callback=self.logged_in)

    def logged_in(self, response: Response) -> list[Any]:
        return []


class World:
    """One worker's cookie middleware on its own jars, for a spider that logs in again."""

    def __init__(self, attempts: int = ATTEMPTS) -> None:
        self.crawler = get_crawler(SiteSpider)
        self.stats = MemoryStatsCollector(self.crawler)
        self.letters: list[bytes] = []
        self.now = [session_cases.T0]
        self.store = ProcessJars(self.stats)
        config = LoginConfig(timeout=TIMEOUT_MS / 1000, attempts=attempts)
        sessions = LocalSessions(config, clock=lambda: self.now[0] / 1000)
        dead = DeadLetters(self.letters.append, self.stats, worker="w", key="site:dead")
        self.spider = SiteSpider()
        dead.spider = self.spider
        self.logins = Logins(self.store, sessions, config, self.stats, dead)
        self.crawled: list[Request] = []
        self.logins.opened(self.spider, self.crawled.append)
        self.mw = SharedCookiesMiddleware(self.store, logins=self.logins)
        self.chain = LoginChain(self.crawler)

    def send(self, request: Request) -> Request | None:
        request.meta.setdefault(meta.LEASED_AT, time.monotonic())  # leased from the frontier
        return asyncio.run(self.mw.process_request(request))

    def answer(self, request: Request, status: int = 200, **kw: Any) -> Request | Response:
        response = HtmlResponse(request.url, status=status, request=request, **kw)
        return asyncio.run(self.mw.process_response(request, response))

    def session(self) -> Session:
        return self.logins.sessions.session(self.store.jar("default"))

    def stat(self, name: str) -> int:
        return int(self.stats.get_value(name, 0))


def expired(world: World, request: Request) -> Request | Response:
    return world.answer(request, 302, headers={"Location": "/login"})


def test_an_expired_session_is_logged_in_once_and_its_requests_wait_for_it():
    w = World()
    first = Request(f"{SITE}/home")
    assert w.send(first) is None
    w.answer(first, headers={"Set-Cookie": "session=s1; Path=/"})
    a, b = Request(f"{SITE}/p/1"), Request(f"{SITE}/p/2")
    assert w.send(a) is None and w.send(b) is None
    assert a.headers.get("Cookie") == b"session=s1"
    # a's answer finds the session expired: a login, and a back to the frontier.
    again = expired(w, a)
    assert isinstance(again, Request) and again.url == a.url and again.dont_filter
    assert again.meta[meta.RETRY_WAIT] == LOGIN_POLL_MS
    assert meta.JAR_VERSION not in again.meta
    assert w.stat("cookies/relogins") == 1
    (step,) = w.crawled
    assert step.url == f"{SITE}/login" and step.callback == w.spider.login and step.dont_filter
    token = step.meta[meta.LOGIN]
    assert w.session().state == RUNNING and w.session().token == token
    # b was sent before the login: expired too, waits, no second login.
    later = expired(w, b)
    assert isinstance(later, Request) and 0 < later.meta[meta.RETRY_WAIT] <= LOGIN_POLL_MS
    assert len(w.crawled) == 1 and w.stat("cookies/relogins") == 1
    # Any request of the jar while the login runs goes back, holding no slot.
    c = Request(f"{SITE}/p/3")
    assert isinstance(w.send(c), Request) and b"Cookie" not in c.headers
    # The login's step goes out, its answer (the form) goes to login(), unjudged.
    assert w.send(step) is None
    form = w.answer(step, body=b"<form></form>", headers={"Set-Cookie": "pre=x; Path=/"})
    assert isinstance(form, Response) and step.meta[meta.LOGIN] == token
    post = w.spider.login(form)
    assert w.chain.get_processed_request(post, form) is post
    assert post.meta[meta.LOGIN] == token and post.dont_filter
    assert w.send(post) is None
    done = w.answer(post, 302, headers={"Location": "/home", "Set-Cookie": "session=s2; Path=/"})
    assert isinstance(done, Response) and meta.LOGIN not in post.meta
    assert w.session().state == OK and w.session().attempts == 1
    # What waited goes out with the new session; a page that is not expired confirms it.
    assert w.send(again) is None
    assert again.headers.get("Cookie") in (b"session=s2; pre=x", b"pre=x; session=s2")
    w.answer(again)
    assert w.session().attempts == 0
    assert w.stat("cookies/relogins") == 1 and w.letters == []


def test_a_login_that_keeps_failing_gives_the_jar_up_as_dead_letters():
    w = World(attempts=2)
    page = Request(f"{SITE}/p/1")
    w.send(page)
    for attempt in (1, 2):
        page = expired(w, page)
        assert isinstance(page, Request)
        post = FormRequest(f"{SITE}/login", formdata={"u": "alice"}, callback=w.spider.logged_in)
        (step,) = w.crawled[-1:]
        post.meta[meta.LOGIN] = step.meta[meta.LOGIN]
        w.send(post)
        with pytest.raises(IgnoreRequest):
            expired(w, post)  # the login's own answer: still the login page
        assert w.stat("cookies/logins_failed") == attempt
        if attempt == 1:
            assert w.send(page) is None  # the next expired answer starts the next login
    assert w.session().state == FAILED
    assert w.stat("cookies/relogins") == 2
    # The last login is a dead letter with its reason; then each request of the jar,
    # the one that waited for the login first.
    assert len(w.letters) == 1 and b"login failed 2 times" in w.letters[0]
    for waiting in (page, Request(f"{SITE}/p/9")):
        with pytest.raises(IgnoreRequest, match="could not be restored"):
            w.send(waiting)
    assert len(w.letters) == 3
    assert all(b"session of jar default could not be restored" in x for x in w.letters[1:])


def test_a_request_of_a_login_that_is_over_is_not_sent():
    w = World()
    page = Request(f"{SITE}/p/1")
    w.send(page)
    expired(w, page)
    (step,) = w.crawled
    late = Request(f"{SITE}/login", meta={meta.LOGIN: "an-older-login"})
    with pytest.raises(IgnoreRequest):
        w.send(late)
    assert w.stat("cookies/logins_superseded") == 1
    assert w.send(step) is None


def test_a_login_answer_with_a_retried_status_is_not_judged():
    w = World()
    w.logins.retried = frozenset({503})
    page = Request(f"{SITE}/p/1")
    w.send(page)
    expired(w, page)
    post = Request(f"{SITE}/login", method="POST", meta={meta.LOGIN: w.session().token})
    w.send(post)
    assert isinstance(w.answer(post, 503), Response)
    assert w.session().state == RUNNING and post.meta[meta.LOGIN]
    # Another error is the login's end: failed.
    with pytest.raises(IgnoreRequest, match="is an error"):
        w.answer(post, 403)
    assert w.session().state == OK and w.stat("cookies/logins_failed") == 1


def test_the_chain_marks_only_a_steps_requests_of_its_jar():
    w = World()
    step = HtmlResponse(f"{SITE}/login", request=Request(f"{SITE}/login", meta={meta.LOGIN: "t"}))
    same, other = Request(f"{SITE}/login"), Request(f"{SITE}/x", meta={"cookiejar": "bob"})
    assert w.chain.get_processed_request(same, step).meta[meta.LOGIN] == "t"
    assert meta.LOGIN not in w.chain.get_processed_request(other, step).meta
    plain = HtmlResponse(f"{SITE}/p", request=Request(f"{SITE}/p"))
    assert meta.LOGIN not in w.chain.get_processed_request(Request(f"{SITE}/q"), plain).meta


def test_a_spider_that_says_when_a_session_expired_must_say_how_to_log_in():
    class Half(Spider):
        name = "half"

        def session_expired(self, response: Response) -> bool:
            return False

    class Own(Spider):
        name = "own"

        def login(self, response: Response) -> None:
            """A spider's own method of that name, without session_expired: not ours."""

    assert logs_in_again(SiteSpider) and not logs_in_again(Own)
    with pytest.raises(ConfigError, match="defines session_expired"):
        logs_in_again(Half)


def test_what_the_engine_downloads_itself_is_sent_as_it_is():
    w = World()
    page = Request(f"{SITE}/p/1")
    w.send(page)
    expired(w, page)
    robots = Request(f"{SITE}/robots.txt")
    assert asyncio.run(w.mw.process_request(robots)) is None
    answer = HtmlResponse(robots.url, status=302, headers={"Location": "/login"})
    assert asyncio.run(w.mw.process_response(robots, answer)) is answer
    assert w.stat("cookies/relogins") == 1 and w.stat("cookies/login_waits") == 1


def test_a_stored_request_forgets_the_version_it_went_out_with():
    request = Request(f"{SITE}/p", meta={meta.JAR_VERSION: 3, meta.LOGIN: "t"})
    kept = ForgetCookiesStep().stored(request)
    assert meta.JAR_VERSION not in kept.meta and kept.meta[meta.LOGIN] == "t"
