"""A jar's session: the state of its login (``~login``), its proxy (``~proxy``), and the rules.

A jar whose spider can log in again (``logins.py``) keeps, beside its
cookies, one control field that says where its session stands:

- ``ok``: no login under way. ``attempts`` counts the logins since a page last
  went out with the session and was not expired (0: the session is good as
  far as anyone knows); ``since`` is the jar's version (``~v``) when the last
  login ended, or when the session was retired: an expired answer to a
  request sent with an older copy met the session before that, and says
  nothing about the new one.
- ``run``: one worker logs the jar in: ``token`` marks that login's requests,
  ``until`` is its deadline (ms, Redis' clock); the jar's other requests wait.
- ``fail``: ``attempts`` logins failed or left the session expired; the
  jar's requests become dead letters with ``reason``.

The rules are the functions below. In Redis the same rules run atomically in
``lua/session.lua`` (``COOKIES_SHARED``, the cluster); with
``COOKIES_SHARED=False`` they run in the worker on its own jars. The tests
run the same cases on both.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

# The control fields (codec.CONTROL): the login's state, the pinned proxy.
LOGIN_FIELD = "~login"
PROXY_FIELD = "~proxy"

OK, RUNNING, FAILED = "ok", "run", "fail"

# What an expired answer means (``expired``):
LOGIN = "login"  # the caller logs the jar in, now
WAIT = "wait"  # another login is under way
STALE = "stale"  # the request went out before the last login ended: send it again
# (and FAILED: the jar is given up)
# How a login ended (``ended``):
DONE = "done"
RETRY = "retry"  # failed; the next expired answer starts another
GONE = "gone"  # not the login under way any more (timed out and taken over, retired)
# Pins (``pin``, ``retire``):
PINNED = "pinned"
RETIRED = "retired"
MOVED = "moved"  # the jar was no longer pinned to the banned proxy: retired by another
UNCHANGED = "unchanged"


@dataclass(frozen=True)
class Session:
    """A jar's ``~login`` field, read (see the module docstring)."""

    state: str = OK
    attempts: int = 0
    since: int = 0
    token: str = ""
    until: int = 0
    reason: str = ""

    @classmethod
    def loads(cls, raw: str | bytes | None) -> Session:
        """The session in ``raw`` (None, or anything this module did not write: a fresh one)."""
        if raw is None:
            return cls()
        try:
            data = json.loads(raw)
        except ValueError:
            return cls()
        if not isinstance(data, dict):
            return cls()
        state = data.get("s")
        if state not in (OK, RUNNING, FAILED):
            return cls()
        return cls(
            state=state,
            attempts=_int(data.get("n")),
            since=_int(data.get("v")),
            token=_str(data.get("t")),
            until=_int(data.get("u")),
            reason=_str(data.get("r")),
        )

    def dumps(self) -> str:
        data = {"s": self.state, "n": self.attempts, "v": self.since, "t": self.token}
        data.update({"u": self.until, "r": self.reason})
        return json.dumps(data, separators=(",", ":"))

    def running(self, now: int) -> bool:
        """A login under way, within its deadline."""
        return self.state == RUNNING and self.until > now


def _int(value: Any) -> int:
    # cjson writes every number as a float-typed JSON number it prints without a fraction.
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def expired(
    session: Session, *, sent: int, token: str, now: int, timeout_ms: int, attempts: int
) -> tuple[str, Session | None]:
    """An answer to a request sent with the jar at version ``sent`` says its session is gone.

    Returns what to do (LOGIN with ``token``, WAIT, STALE, FAILED) and the
    session to write, or None when nothing changes.
    """
    if session.state == FAILED:
        return FAILED, None
    if session.running(now):
        return WAIT, None
    if sent < session.since:
        return STALE, None
    # A login past its deadline counts as one that failed.
    n = session.attempts + 1
    if n > attempts:
        reason = f"still expired after {session.attempts} logins"
        return FAILED, replace(session, state=FAILED, token="", until=0, reason=reason)
    return LOGIN, Session(RUNNING, n, session.since, token, now + timeout_ms)


def ended(
    session: Session, *, token: str, ok: bool, attempts: int, reason: str, version: int
) -> tuple[str, Session | None]:
    """The login ``token`` ended: logged in (``ok``) or not, with the jar then at ``version``.

    Logged in, its session counts from ``version`` on; failed, the next
    expired answer starts another login, unless this was the last attempt.
    """
    if session.state != RUNNING or session.token != token:
        return GONE, None
    if ok:
        return DONE, Session(OK, session.attempts, version)
    if session.attempts >= attempts:
        why = f"login failed {session.attempts} times, last: {reason}"
        return FAILED, Session(FAILED, session.attempts, session.since, reason=why)
    return RETRY, Session(OK, session.attempts, session.since)


def confirmed(session: Session, *, sent: int) -> Session | None:
    """A page sent with the jar at ``sent`` was not expired: the logins before it held."""
    if session.state == OK and session.attempts and sent >= session.since:
        return replace(session, attempts=0)
    return None


def retired(session: Session, *, version: int) -> Session:
    """The jar's proxy was banned: its cookies are gone, its session starts afresh
    at ``version`` (a login under way through the banned proxy is dropped); a
    jar given up stays so."""
    if session.state == FAILED:
        return session
    return Session(OK, 0, version)
