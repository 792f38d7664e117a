"""The cookie settings (Scrapy's ``COOKIES_ENABLED``/``COOKIES_DEBUG``, ours
``COOKIES_SHARED``/``COOKIES_JAR_TTL``), read and checked, and the jars' limits."""

from __future__ import annotations

from dataclasses import dataclass

from scrapy.settings import BaseSettings

from spiders_project.config import SettingsReader

# RFC 6265, section 6.1: what a user agent should hold at least, which is
# what a site may count on and what a jar keeps at most here. A cookie's size
# is its name, value, domain and path together (the RFC's "name, value, and
# attributes"; the flags are a few bytes).
MAX_COOKIE_BYTES = 4096
MAX_COOKIES_PER_DOMAIN = 50
MAX_COOKIES_PER_JAR = 3000
# A worker that uses a jar without changing it renews the jar's time to live
# at most this often (seconds): one write a minute per jar and worker keeps a
# jar in use alive, far below one per page.
TOUCH_INTERVAL = 60.0
# A jar whose copy this worker used within this many seconds has its version
# read with every lease call (store.py, reads that ride), the most recently
# used first and at most LEASE_READ_JARS of them: each costs Redis one HGET a
# lease call, but no round trip; a jar left out is read when a request needs it.
LEASE_READ_IDLE = 10.0
LEASE_READ_JARS = 8


@dataclass(frozen=True)
class CookiesConfig:
    """Whether and how this worker keeps cookies (``COOKIES_ENABLED`` false: none)."""

    enabled: bool
    shared: bool
    jar_ttl: float  # seconds after a shared jar's last update or use
    debug: bool  # COOKIES_DEBUG: names and domains logged, never values

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> CookiesConfig:
        read = SettingsReader(settings)
        return cls(
            enabled=read.getbool("COOKIES_ENABLED"),
            shared=read.getbool("COOKIES_SHARED"),
            jar_ttl=read.getfloat("COOKIES_JAR_TTL", above=0),
            debug=read.getbool("COOKIES_DEBUG"),
        )

    @property
    def jar_ttl_ms(self) -> int:
        return max(1, round(self.jar_ttl * 1000))


# A request of a jar that is logging in again goes back to the frontier for
# at most this long (ms) before it looks again: a login takes a few round
# trips to the site, and each look costs a lease and an ack, not a download.
LOGIN_POLL_MS = 1000


@dataclass(frozen=True)
class LoginConfig:
    """How a jar logs in again (``COOKIES_LOGIN_TIMEOUT``, ``COOKIES_LOGIN_ATTEMPTS``)."""

    timeout: float  # seconds a login may take before it counts as failed
    attempts: int  # logins in a row that may fail before the jar is given up

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> LoginConfig:
        read = SettingsReader(settings)
        return cls(
            timeout=read.getfloat("COOKIES_LOGIN_TIMEOUT", above=0),
            attempts=read.getint("COOKIES_LOGIN_ATTEMPTS", minimum=1),
        )

    @property
    def timeout_ms(self) -> int:
        return max(1, round(self.timeout * 1000))
