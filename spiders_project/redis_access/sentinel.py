"""Redis Sentinel's connections: TLS and passwords for the sentinels and the master.

redis-py's ``Sentinel`` copies nothing from one connection to the other
(redis/redis-py#1002, #2073, #3128): ``sentinel_kwargs`` go to the sentinels'
own clients only, and ``master_for``'s keyword arguments to the master's pool
only. So both are built here, in full:

- the master's connections take the db, user, password and ``ssl_*`` query
  parameters of ``REDIS_URL``; a ``rediss://`` URL makes them
  ``SentinelManagedSSLConnection`` (redis-py picks that class when the pool
  gets ``ssl=True``; passing ``connection_class`` would drop the sentinel
  lookup);
- the sentinels' connections take ``REDIS_SENTINEL_USERNAME`` and
  ``REDIS_SENTINEL_PASSWORD`` (a sentinel's ``requirepass`` is its own, not
  the master's), and TLS when ``REDIS_SENTINEL_TLS`` says so ("auto": when
  ``REDIS_URL`` is ``rediss://``), with ``REDIS_URL``'s ``ssl_*`` parameters
  unless ``REDIS_SENTINEL_SSL_OPTIONS`` names others.

And the master's pool follows the sentinels (:class:`FollowingPool`): redis-py
asks them where the master is only when a connection connects, and drops a
connection only when its server answers READONLY. After ``SENTINEL
FAILOVER`` the old master stays a writable master with no replica until the
sentinels demote it, seconds later (docs/BENCHMARKS.md, "Figures moved out
of code comments"), and every write sent there in between is lost when it
resyncs from the new one.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import redis.asyncio.sentinel
import redis.sentinel
from redis.connection import parse_url

from spiders_project.config import SettingsReader

#: The TLS options that both redis-py clients (blocking and asyncio) take, as
#: ``rediss://`` query parameters name them.
SSL_OPTIONS = frozenset(
    {
        "ssl_keyfile",
        "ssl_certfile",
        "ssl_cert_reqs",
        "ssl_ca_certs",
        "ssl_ca_path",
        "ssl_ca_data",
        "ssl_check_hostname",
        "ssl_password",
        "ssl_min_version",
        "ssl_ciphers",
        "ssl_include_verify_flags",
        "ssl_exclude_verify_flags",
    }
)
TLS_CHOICES = ("auto", "true", "false")
_CERT_REQS = ("none", "optional", "required")
_TLS_FILES = ("ssl_ca_certs", "ssl_certfile", "ssl_keyfile")
logger = logging.getLogger("spiders_project.redis_access.connection")
#: Seconds between two questions to the sentinels about where the master is,
#: asked as a connection is taken from the pool. One SENTINEL MASTERS a second
#: per pool is cheap; it must stay below REDIS_WAIT_TIMEOUT's default (1 s), so
#: that after a WAIT the old master could not confirm, the writes sent again
#: go to the new one.
MASTER_RECHECK = 1.0


@dataclass(frozen=True)
class SentinelAccess:
    """What the sentinels themselves need: a user, a password, TLS and its options.

    ``password`` never appears in a repr (a config may be logged whole).
    """

    username: str = ""
    password: str = field(default="", repr=False)
    tls: bool = False
    ssl_options: tuple[tuple[str, Any], ...] = ()

    @classmethod
    def from_settings(cls, read: SettingsReader, url: str) -> SentinelAccess:
        """Read the REDIS_SENTINEL_* access settings; ``url`` is the valid REDIS_URL."""
        mode = read.getstr("REDIS_SENTINEL_TLS").strip().lower()
        read.check(mode in TLS_CHOICES, "REDIS_SENTINEL_TLS", "must be auto, true or false")
        tls = url_tls(url) if mode == "auto" else mode == "true"
        options = dict(ssl_options(url))
        options.update(_override(read))
        return cls(
            username=read.getstr("REDIS_SENTINEL_USERNAME"),
            password=read.getstr("REDIS_SENTINEL_PASSWORD"),
            tls=tls,
            ssl_options=tuple(sorted(options.items())) if tls else (),
        )

    def kwargs(self, socket_timeout: float) -> dict[str, Any]:
        """Keyword arguments of each sentinel's client (redis-py's ``sentinel_kwargs``).

        No retries (``retry=None``): redis-py 8 gives every client 10, with a
        growing backoff, so one sentinel that does not answer (cut off by a
        partition: packets dropped) would hold each question about the master
        through all ten and their backoff instead of one ``socket_timeout``
        before the next sentinel is asked (what tests/e2e/test_jepsen.py
        measured: docs/BENCHMARKS.md, "Figures moved out of code comments").
        """
        kwargs: dict[str, Any] = {
            "socket_timeout": socket_timeout,
            "socket_connect_timeout": socket_timeout,
            "retry": None,
        }
        if self.username:
            kwargs["username"] = self.username
        if self.password:
            kwargs["password"] = self.password
        if self.tls:
            kwargs["ssl"] = True
            kwargs.update(self.ssl_options)
        return kwargs


def url_tls(url: str) -> bool:
    """True when ``url`` asks for TLS (``rediss://``)."""
    return urlsplit(url).scheme.lower() == "rediss"


def ssl_options(url: str) -> dict[str, Any]:
    """The ``ssl_*`` query parameters of a Redis URL, typed as redis-py types them."""
    return {k: v for k, v in parse_url(url).items() if k in SSL_OPTIONS}


def master_kwargs(url: str, client_kwargs: dict[str, Any]) -> dict[str, Any]:
    """Keyword arguments of the master's pool (``Sentinel.master_for``).

    ``client_kwargs``: the timeouts and retry policy every client of ours has.
    The db, user and password come from ``url``, and with ``rediss://`` TLS
    with its ``ssl_*`` parameters: ``ssl=True`` is how redis-py's
    ``SentinelConnectionPool`` chooses its SSL connection class.
    """
    parsed = parse_url(url)
    master = dict(client_kwargs)
    for name in ("db", "username", "password"):
        if parsed.get(name) is not None:
            master[name] = parsed[name]
    if url_tls(url):
        master["ssl"] = True
        master.update(ssl_options(url))
    return master


def _override(read: SettingsReader) -> dict[str, Any]:
    """REDIS_SENTINEL_SSL_OPTIONS: ``ssl_*`` parameters, in URL query form, for the sentinels."""
    text = read.getstr("REDIS_SENTINEL_SSL_OPTIONS").strip().lstrip("?")
    if not text:
        return {}
    try:
        pairs = parse_qsl(text, keep_blank_values=True, strict_parsing=True)
    except ValueError:
        read.fail("REDIS_SENTINEL_SSL_OPTIONS", "not name=value&name=value", "(not shown)")
    for name, _ in pairs:
        if name not in SSL_OPTIONS:
            # The value may hold ssl_password: only the names are shown.
            read.fail(
                "REDIS_SENTINEL_SSL_OPTIONS",
                f"{name!r} is not one of {', '.join(sorted(SSL_OPTIONS))}",
                "(not shown)",
            )
    try:
        # redis-py's own parsers, so a value means what it means in REDIS_URL.
        parsed = parse_url(f"rediss://sentinel/?{text}")
    except ValueError as exc:
        read.fail("REDIS_SENTINEL_SSL_OPTIONS", str(exc), "(not shown)")
    options = {k: v for k, v in parsed.items() if k in SSL_OPTIONS}
    # The checks REDIS_URL's own parameters get (connection._check_tls).
    reqs = options.get("ssl_cert_reqs")
    if reqs is not None and reqs not in _CERT_REQS:
        read.fail(
            "REDIS_SENTINEL_SSL_OPTIONS",
            f"ssl_cert_reqs={reqs}: not one of {', '.join(_CERT_REQS)}",
            "(not shown)",
        )
    for name in _TLS_FILES:
        path = options.get(name)
        if path is not None and not os.path.isfile(str(path)):
            read.fail("REDIS_SENTINEL_SSL_OPTIONS", f"{name}={path}: no such file", "(not shown)")
    return options


# Whether this process has warned about the sentinels' verification (one line
# per process; REDIS_URL's own is warned about by connection.py).
_warned: list[bool] = []


def warn_if_unverified(access: SentinelAccess, url: str) -> None:
    """One WARNING per process when the sentinels' TLS does not verify, and
    REDIS_SENTINEL_SSL_OPTIONS, not REDIS_URL, turned verification off."""
    options = dict(access.ssl_options)
    inherited = ssl_options(url) if url_tls(url) else {}
    off = [
        f"{name}={value}".lower()
        for name, value in (
            ("ssl_cert_reqs", options.get("ssl_cert_reqs")),
            ("ssl_check_hostname", options.get("ssl_check_hostname")),
        )
        if value in ("none", False) and inherited.get(name) != value
    ]
    if not access.tls or not off or _warned:
        return
    _warned.append(True)
    logger.warning(
        "REDIS_SENTINEL_SSL_OPTIONS has %s: the sentinels' certificates are not fully "
        "verified, so anyone on the network path can pose as a sentinel and name its own "
        "master (docs/SECURITY.md: leave verification on)",
        " and ".join(off),
    )


class FollowingPool(redis.sentinel.SentinelConnectionPool):
    """The master's pool, asking the sentinels where the master is at most every
    :data:`MASTER_RECHECK` seconds as a connection is taken: when they name
    another, redis-py's own ``get_master_address`` drops the idle connections
    to the old one, and ``owns_connection`` those in use as they come back."""

    _asked = float("-inf")

    def get_connection(self, *args: Any, **kwargs: Any) -> Any:
        now = time.monotonic()
        if now - self._asked >= MASTER_RECHECK:
            self._asked = now
            try:
                self.get_master_address()  # type: ignore[no-untyped-call]
            except (redis.ConnectionError, redis.TimeoutError):
                pass  # sentinels away: the connection we have still serves
        return super().get_connection(*args, **kwargs)


class AsyncFollowingPool(redis.asyncio.sentinel.SentinelConnectionPool):
    """:class:`FollowingPool` for ``redis.asyncio``.

    redis-py's asyncio pool takes a connection back without asking
    ``owns_connection``, so one in use while the sentinels named another
    master would go on serving the old one until it is demoted (seconds
    later, its writes then lost): it is disconnected as it comes back,
    and connects to the new master when next used.
    """

    _asked = float("-inf")

    async def get_connection(self, *args: Any, **kwargs: Any) -> Any:
        now = time.monotonic()
        if now - self._asked >= MASTER_RECHECK:
            self._asked = now
            try:
                await self.get_master_address()  # type: ignore[no-untyped-call]
            except (redis.ConnectionError, redis.TimeoutError):
                pass  # sentinels away: the connection we have still serves
        return await super().get_connection(*args, **kwargs)  # type: ignore[no-untyped-call]

    async def release(self, connection: Any) -> None:
        master = self.master_address
        if master is not None and (connection.host, connection.port) != master:
            await connection.disconnect()
        await super().release(connection)
