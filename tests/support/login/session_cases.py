"""The cases every place the session rules run must pass: the worker's own jars
(``LocalSessions``, tests/unit/test_logins.py) and Redis' (``lua/session.lua``
through ``RedisSessions``, tests/integration/test_logins.py).

Each case is an async function of a :class:`Harness`, which gives a session
store, one jar's copy, a clock the case sets, and ``settle()``: whatever the
store sends without waiting is in, and the copy is read again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from spiders_project.cookies import sessions
from spiders_project.cookies.session_store import SessionStore
from spiders_project.cookies.sessions import (
    FAILED,
    GONE,
    LOGIN,
    MOVED,
    OK,
    PINNED,
    RETIRED,
    RETRY,
    RUNNING,
    STALE,
    WAIT,
)
from spiders_project.cookies.store import LocalJar

# The cases run with these: COOKIES_LOGIN_TIMEOUT 10 s, COOKIES_LOGIN_ATTEMPTS 2.
TIMEOUT_MS = 10_000
ATTEMPTS = 2
T0 = 1_700_000_000_000


@dataclass
class Harness:
    store: SessionStore
    local: LocalJar
    set_now: Callable[[int], None]
    # What the store sent without waiting goes in; the copy is read again.
    settle: Callable[[], Awaitable[LocalJar]]
    # Sets a cookie in the jar as a response would (through ``via``, a proxy).
    set_cookie: Callable[[str, str | None], Awaitable[None]]
    # The cookie names in the jar as Redis (or the worker) holds it.
    cookie_names: Callable[[], Awaitable[set[str]]]

    async def reread(self) -> None:
        self.local = await self.settle()


async def one_login_of_two_expired_answers(h: Harness) -> None:
    h.set_now(T0)
    sent = h.local.version
    first = await h.store.expired(h.local, sent=sent, token="a")
    second = await h.store.expired(h.local, sent=sent, token="b")
    assert (first.what, second.what) == (LOGIN, WAIT)
    assert first.session.state == RUNNING and first.session.token == "a"
    assert first.session.until == T0 + TIMEOUT_MS and first.session.attempts == 1
    assert second.session.token == "a"  # the login under way is the first's
    assert h.store.session(h.local).running(T0 + 1)


async def a_login_that_ended_well_and_answers_sent_before_it(h: Harness) -> None:
    h.set_now(T0)
    before = h.local.version
    await h.store.expired(h.local, sent=before, token="a")
    h.store.ended_ok(h.local, "a")
    await h.reread()
    session = h.store.session(h.local)
    assert (session.state, session.attempts) == (OK, 1)
    assert session.since == h.local.version > before
    # An answer to a request sent before the login ended: send it again, no login.
    stale = await h.store.expired(h.local, sent=before, token="b")
    assert stale.what == STALE
    # A page after it that is not expired: the login held.
    h.store.confirmed(h.local, h.local.version)
    await h.reread()
    assert h.store.session(h.local).attempts == 0
    # Expired again later (sent with the new session): a new login, attempt 1.
    again = await h.store.expired(h.local, sent=h.local.version, token="c")
    assert again.what == LOGIN and again.session.attempts == 1


async def logins_that_fail_give_the_jar_up(h: Harness) -> None:
    h.set_now(T0)
    first = await h.store.expired(h.local, sent=h.local.version, token="a")
    assert first.what == LOGIN
    retry = await h.store.ended_failed(h.local, "a", "<302 /login> is still expired")
    assert retry.what == RETRY and retry.session.state == OK and retry.session.attempts == 1
    second = await h.store.expired(h.local, sent=h.local.version, token="b")
    assert second.what == LOGIN and second.session.attempts == 2
    last = await h.store.ended_failed(h.local, "b", "<302 /login> is still expired")
    assert last.what == FAILED
    assert last.session.reason == "login failed 2 times, last: <302 /login> is still expired"
    await h.reread()
    after = await h.store.expired(h.local, sent=h.local.version, token="c")
    assert after.what == FAILED and h.store.session(h.local).state == FAILED


async def logins_that_leave_the_session_expired_give_the_jar_up(h: Harness) -> None:
    h.set_now(T0)
    for attempt, token in enumerate(("a", "b"), start=1):
        outcome = await h.store.expired(h.local, sent=h.local.version, token=token)
        assert (outcome.what, outcome.session.attempts) == (LOGIN, attempt)
        h.store.ended_ok(h.local, token)
        await h.reread()
    given_up = await h.store.expired(h.local, sent=h.local.version, token="c")
    assert given_up.what == FAILED
    assert given_up.session.reason == "still expired after 2 logins"


async def a_login_past_its_deadline_is_taken_over(h: Harness) -> None:
    h.set_now(T0)
    await h.store.expired(h.local, sent=h.local.version, token="a")
    h.set_now(T0 + TIMEOUT_MS - 1)
    assert (await h.store.expired(h.local, sent=h.local.version, token="b")).what == WAIT
    h.set_now(T0 + TIMEOUT_MS)
    late = await h.store.expired(h.local, sent=h.local.version, token="b")
    assert late.what == LOGIN and late.session.token == "b" and late.session.attempts == 2
    # The first login's answer, at last: not the login under way any more.
    assert (await h.store.ended_failed(h.local, "a", "late")).what == GONE
    h.store.ended_ok(h.local, "a")
    await h.reread()
    assert h.store.session(h.local).token == "b"


async def a_jar_is_pinned_by_its_first_cookie_through_a_proxy(h: Harness) -> None:
    h.set_now(T0)
    await h.set_cookie("consent", None)  # not through a proxy of the pool: no pin
    await h.reread()
    assert sessions.PROXY_FIELD not in h.local.control
    await h.set_cookie("session", "http://p1:1")
    await h.reread()
    assert h.local.control[sessions.PROXY_FIELD] == "http://p1:1"
    # Another session, through another proxy: not this jar's.
    await h.set_cookie("other", "http://p2:2")
    await h.reread()
    assert await h.cookie_names() == {"consent", "session"}
    assert (await h.store.pin(h.local, "http://p2:2")).proxy == "http://p1:1"


async def a_banned_proxy_retires_the_session(h: Harness) -> None:
    h.set_now(T0)
    assert (await h.store.pin(h.local, "http://p1:1")).proxy == "http://p1:1"
    pinned = await h.store.pin(h.local, "http://p2:2")
    assert (pinned.what, pinned.proxy) == (PINNED, "http://p1:1")
    await h.set_cookie("session", "http://p1:1")
    await h.reread()
    assert await h.cookie_names() == {"session"}
    login = await h.store.expired(h.local, sent=h.local.version, token="a")
    assert login.what == LOGIN
    # Another worker's view: p2 banned, not this jar's proxy.
    assert (await h.store.retire(h.local, "http://p2:2", "http://p3:3")).what == MOVED
    retired = await h.store.retire(h.local, "http://p1:1", "http://p2:2")
    assert retired.what == RETIRED and retired.proxy == "http://p2:2"
    await h.reread()
    assert await h.cookie_names() == set()
    assert h.local.control[sessions.PROXY_FIELD] == "http://p2:2"
    session = h.store.session(h.local)
    assert (session.state, session.attempts, session.since) == (OK, 0, h.local.version)
    # The login through p1 is over; cookies that still come back through p1 are refused.
    assert (await h.store.ended_failed(h.local, "a", "late")).what == GONE
    await h.set_cookie("late", "http://p1:1")
    await h.set_cookie("fresh", "http://p2:2")
    await h.reread()
    assert await h.cookie_names() == {"fresh"}


CASES = [
    one_login_of_two_expired_answers,
    a_login_that_ended_well_and_answers_sent_before_it,
    logins_that_fail_give_the_jar_up,
    logins_that_leave_the_session_expired_give_the_jar_up,
    a_login_past_its_deadline_is_taken_over,
    a_jar_is_pinned_by_its_first_cookie_through_a_proxy,
    a_banned_proxy_retires_the_session,
]
