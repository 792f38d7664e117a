"""Where a jar's session rules (``sessions.py``) run: in Redis for the cluster, or in the worker.

:class:`RedisSessions` runs them in ``lua/session.lua``, one script call per
change, atomically with the jar they guard, so that of two workers whose
answers find a session expired at once exactly one logs in. A change the
requests after it must see in the jar only after the cookies of the same
answer (a login that ended well) goes out as a prior write behind those
cookies (``frontier/write_behind``); the others are awaited, as the caller
needs the answer. :class:`LocalSessions` is the same rules on this worker's
own jars (``COOKIES_SHARED=False``).

Either way the worker's copy of the jar (``LocalJar.control``) holds the
session as the last change it made or read left it; the jar's cookies are
read again by the next request leased after the change (``store.py``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from spiders_project.cookies import sessions
from spiders_project.cookies.config import LoginConfig
from spiders_project.cookies.sessions import LOGIN_FIELD, PROXY_FIELD, Session
from spiders_project.cookies.store import LUA_DIR, LocalJar, SharedJars
from spiders_project.redis_access import load_lua


@dataclass(frozen=True)
class Outcome:
    """What a change of a jar's session said: ``what`` (``sessions``' names), the
    session and proxy after it, and the jar's version then."""

    what: str
    session: Session
    version: int
    proxy: str


class SessionStore(Protocol):
    """The changes a worker makes to a jar's session (``sessions.py`` names each rule)."""

    def now_ms(self) -> int:
        """Now, in ms on the clock the sessions' deadlines are on."""

    def session(self, local: LocalJar) -> Session:
        """The session of ``local`` as this worker last saw it."""

    async def expired(self, local: LocalJar, *, sent: int, token: str) -> Outcome: ...

    def ended_ok(self, local: LocalJar, token: str) -> None:
        """Logged in: written behind the cookies of the answer that says so."""

    async def ended_failed(self, local: LocalJar, token: str, reason: str) -> Outcome: ...

    def confirmed(self, local: LocalJar, sent: int) -> None:
        """A page was not expired: the logins before it held (no answer awaited)."""

    async def pin(self, local: LocalJar, proxy: str) -> Outcome: ...

    async def retire(self, local: LocalJar, old: str, new: str) -> Outcome: ...


class _Parsed:
    """Each jar's session, parsed once per change of its ``~login`` field."""

    def __init__(self) -> None:
        self._cache: dict[str, tuple[str | None, Session]] = {}

    def session(self, local: LocalJar) -> Session:
        raw = local.control.get(LOGIN_FIELD)
        cached = self._cache.get(local.id)
        if cached is not None and cached[0] == raw:
            return cached[1]
        session = Session.loads(raw)
        self._cache[local.id] = (raw, session)
        return session


class LocalSessions(_Parsed):
    """The rules on this worker's own jars (``COOKIES_SHARED=False``): each
    change of a session is a new version of the jar's copy."""

    def __init__(self, config: LoginConfig, clock: Callable[[], float] = time.time) -> None:
        super().__init__()
        self.config = config
        self.clock = clock

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    def _write(self, local: LocalJar, what: str, session: Session | None) -> Outcome:
        if session is not None:
            local.control[LOGIN_FIELD] = session.dumps()
            local.version += 1
        return Outcome(what, self.session(local), local.version, local.control.get(PROXY_FIELD, ""))

    async def expired(self, local: LocalJar, *, sent: int, token: str) -> Outcome:
        what, session = sessions.expired(
            self.session(local),
            sent=sent,
            token=token,
            now=self.now_ms(),
            timeout_ms=self.config.timeout_ms,
            attempts=self.config.attempts,
        )
        return self._write(local, what, session)

    def _ended(self, local: LocalJar, token: str, ok: bool, reason: str) -> Outcome:
        what, session = sessions.ended(
            self.session(local),
            token=token,
            ok=ok,
            attempts=self.config.attempts,
            reason=reason,
            version=local.version + 1,
        )
        return self._write(local, what, session)

    def ended_ok(self, local: LocalJar, token: str) -> None:
        self._ended(local, token, True, "")

    async def ended_failed(self, local: LocalJar, token: str, reason: str) -> Outcome:
        return self._ended(local, token, False, reason)

    def confirmed(self, local: LocalJar, sent: int) -> None:
        session = sessions.confirmed(self.session(local), sent=sent)
        if session is not None:
            local.control[LOGIN_FIELD] = session.dumps()

    async def pin(self, local: LocalJar, proxy: str) -> Outcome:
        if not local.control.get(PROXY_FIELD):
            local.control[PROXY_FIELD] = proxy
            local.version += 1
        return self._write(local, sessions.PINNED, None)

    async def retire(self, local: LocalJar, old: str, new: str) -> Outcome:
        if local.control.get(PROXY_FIELD, "") != old:
            return self._write(local, sessions.MOVED, None)
        local.cookies.clear()
        local.control[PROXY_FIELD] = new
        session = sessions.retired(self.session(local), version=local.version + 1)
        return self._write(local, sessions.RETIRED, session)


class RedisSessions(_Parsed):
    """The rules in Redis (``lua/session.lua``), for the jars the cluster shares."""

    def __init__(self, jars: SharedJars, config: LoginConfig) -> None:
        super().__init__()
        self.jars = jars
        self.redis = jars.redis
        self.config = config
        self.script = load_lua(LUA_DIR, "session")

    def now_ms(self) -> int:
        """Redis' clock, as the script reads it (a test's set clock when it sets one)."""
        arg = self.redis.clock.arg()
        return arg if isinstance(arg, int) else int(self.redis.time.now() * 1000)

    def _args(self, local: LocalJar, op: str, *rest: Any) -> list[Any]:
        return [self.redis.clock.arg(), local.id, self.jars.ttl_ms, op, *rest]

    async def _call(self, local: LocalJar, op: str, *rest: Any) -> Outcome:
        keys = self.jars.script_keys(local.id)
        reply = await self.jars.calls.script(self.script, keys, self._args(local, op, *rest))
        what, state, version, proxy = reply
        outcome = Outcome(_text(what), Session.loads(state), int(version), _text(proxy))
        # This worker sees its own change at once; the cookies come with the next read.
        local.control[LOGIN_FIELD] = _text(state)
        if outcome.proxy:
            local.control[PROXY_FIELD] = outcome.proxy
        else:
            local.control.pop(PROXY_FIELD, None)
        return outcome

    async def expired(self, local: LocalJar, *, sent: int, token: str) -> Outcome:
        timeout, attempts = self.config.timeout_ms, self.config.attempts
        return await self._call(local, "expired", sent, token, timeout, attempts)

    def ended_ok(self, local: LocalJar, token: str) -> None:
        args = self._args(local, "ended", token, 1, self.config.attempts, "")
        self.jars.batcher.prior(self.script, self.jars.script_keys(local.id), args)

    async def ended_failed(self, local: LocalJar, token: str, reason: str) -> Outcome:
        return await self._call(local, "ended", token, 0, self.config.attempts, reason)

    def confirmed(self, local: LocalJar, sent: int) -> None:
        session = sessions.confirmed(self.session(local), sent=sent)
        if session is None:
            return
        # Once per worker and login: this copy says so from now on.
        local.control[LOGIN_FIELD] = session.dumps()
        args = self._args(local, "confirmed", sent)
        self.jars.batcher.script(self.script, self.jars.script_keys(local.id), args)

    async def pin(self, local: LocalJar, proxy: str) -> Outcome:
        return await self._call(local, "pin", proxy)

    async def retire(self, local: LocalJar, old: str, new: str) -> Outcome:
        outcome = await self._call(local, "retire", old, new)
        # The copy's cookies are the old session's, which must never go out
        # with the new proxy its control fields now name: none until it is read again.
        local.cookies.clear()
        return outcome


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
