"""Who may use the console: the htpasswd users, their sessions, the login throttle, CSRF.

- Users come from an htpasswd file of bcrypt entries (``htpasswd -B``): one
  ``user:hash`` a line, blank lines and ``#`` comments skipped. Any other
  entry (MD5, SHA-1, crypt, plain text) is left out, with one log line: those
  hashes are too cheap to keep in a file an attacker might read. The file is
  read again when it changes (its mtime), at the next login.
- A session is a random token in a cookie (HttpOnly, SameSite=Strict, Secure
  over TLS) naming a record in this process' memory: its user, its CSRF token,
  when it was last used. It ends at logout, or ``CONSOLE_SESSION_IDLE``
  seconds after its last request.
- Failed logins are counted per user name and per client address over
  ``CONSOLE_LOGIN_WINDOW`` seconds; past ``CONSOLE_LOGIN_ATTEMPTS`` of either,
  logins are refused without a password check until the window has passed.
- Every action carries its session's CSRF token, compared in constant time.
"""

from __future__ import annotations

import hmac
import logging
import secrets
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import bcrypt

logger = logging.getLogger("monitor.console")

# The prefixes of bcrypt hashes: htpasswd -B writes $2y$, Python's bcrypt $2b$.
BCRYPT = (b"$2a$", b"$2b$", b"$2y$")
# bcrypt reads at most 72 bytes of a password; a longer one is refused, not cut.
MAX_PASSWORD = 72
# Throttle entries kept at most (user names and addresses): a flood of made-up
# names cannot grow the process without bound; the oldest go first.
THROTTLE_KEYS = 10_000


def read_htpasswd(path: Path) -> dict[str, bytes]:
    """The bcrypt entries of an htpasswd file: user -> hash."""
    users: dict[str, bytes] = {}
    for number, raw in enumerate(path.read_bytes().splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith(b"#"):
            continue
        user, sep, hashed = line.partition(b":")
        name = user.decode("utf-8", "replace")
        if not sep or not user or not hashed.startswith(BCRYPT):
            logger.error(
                "%s line %d (%s): not a bcrypt entry (use htpasswd -B), left out",
                path,
                number,
                name if sep else "no user:hash",
            )
            continue
        users[name] = hashed
    return users


def _cost(hashed: bytes) -> int:
    """The work factor of a bcrypt hash ("$2y$05$..." -> 5), within bcrypt's range."""
    try:
        return min(max(int(hashed[4:6]), 4), 31)
    except ValueError:
        return 5


class Users:
    """The htpasswd file's users, and which of them are operators."""

    def __init__(self, path: Path, operators: Iterable[str]) -> None:
        self.path = path
        self.operators = frozenset(operators)
        self._mtime = -1.0
        self._hashes: dict[str, bytes] = {}
        # Checked for unknown users, at the file's cost, so a login takes as long
        # whether or not the user exists.
        self._dummy = b""
        self.reload()

    def reload(self) -> None:
        """Read the file again if it changed since it was last read."""
        try:
            mtime = self.path.stat().st_mtime
        except OSError as exc:
            logger.error("cannot read %s: %s; the users read before stay", self.path, exc)
            return
        if mtime != self._mtime:
            self._hashes = read_htpasswd(self.path)
            self._mtime = mtime
            cost = max((_cost(h) for h in self._hashes.values()), default=5)
            self._dummy = bcrypt.hashpw(b"not a password", bcrypt.gensalt(cost))
            logger.info("console users: %d from %s", len(self._hashes), self.path)

    @property
    def names(self) -> frozenset[str]:
        return frozenset(self._hashes)

    def check(self, user: str, password: str) -> bool:
        """Whether ``password`` is ``user``'s (bcrypt: blocking, and slow on purpose)."""
        hashed = self._hashes.get(user)
        secret = password.encode("utf-8")
        if len(secret) > MAX_PASSWORD:
            return False
        try:
            ok = bcrypt.checkpw(secret, hashed if hashed is not None else self._dummy)
        except ValueError:  # a "$2y$" entry that is not a whole hash
            logger.error("%s: the hash of %s is not a bcrypt hash", self.path, user)
            return False
        return ok and hashed is not None

    def may_act(self, user: str) -> bool:
        """An operator of CONSOLE_OPERATORS who is (still) in the file."""
        return user in self.operators and user in self._hashes


@dataclass
class Session:
    token: str
    user: str
    csrf: str
    last_used: float
    flash: list[tuple[str, str]] = field(default_factory=list)  # (kind, text), shown once


class Sessions:
    """The live sessions, by token."""

    def __init__(self, idle: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.idle = idle
        self.clock = clock
        self._by_token: dict[str, Session] = {}

    def new(self, user: str) -> Session:
        self._expire()
        session = Session(secrets.token_urlsafe(32), user, secrets.token_urlsafe(32), self.clock())
        self._by_token[session.token] = session
        return session

    def get(self, token: str | None) -> Session | None:
        """The session of ``token`` if it is live (its use counts as activity)."""
        if not token:
            return None
        session = self._by_token.get(token)
        now = self.clock()
        if session is None or now - session.last_used > self.idle:
            self._by_token.pop(token or "", None)
            return None
        session.last_used = now
        return session

    def end(self, token: str) -> None:
        self._by_token.pop(token, None)

    def _expire(self) -> None:
        now = self.clock()
        for token in [t for t, s in self._by_token.items() if now - s.last_used > self.idle]:
            del self._by_token[token]


class Throttle:
    """Failed logins per key ("user:<name>", "addr:<ip>") within a sliding window."""

    def __init__(
        self, attempts: int, window: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.attempts = attempts
        self.window = window
        self.clock = clock
        self._failures: dict[str, list[float]] = {}

    def _recent(self, key: str, now: float) -> list[float]:
        kept = [t for t in self._failures.get(key, []) if now - t < self.window]
        if kept:
            self._failures[key] = kept
        else:
            self._failures.pop(key, None)
        return kept

    def refused(self, keys: Iterable[str]) -> bool:
        """Whether any of ``keys`` has used up its attempts."""
        now = self.clock()
        return any(len(self._recent(k, now)) >= self.attempts for k in keys)

    def failed(self, keys: Iterable[str]) -> None:
        now = self.clock()
        for key in keys:
            self._failures.setdefault(key, []).append(now)
            self._failures[key] = self._failures[key][-self.attempts :]
        while len(self._failures) > THROTTLE_KEYS:
            del self._failures[next(iter(self._failures))]

    def succeeded(self, key: str) -> None:
        """A good password clears its user's count (never an address's: one account
        must not buy an address more guesses at the others)."""
        self._failures.pop(key, None)


def csrf_ok(session: Session, token: object) -> bool:
    """Whether ``token`` (a form's field, any type) is the session's, in constant time."""
    return (
        isinstance(token, str)
        and bool(token)
        and hmac.compare_digest(session.csrf.encode(), token.encode())
    )
