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
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlsplit

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
        """Keyword arguments of each sentinel's client (redis-py's ``sentinel_kwargs``)."""
        kwargs: dict[str, Any] = {
            "socket_timeout": socket_timeout,
            "socket_connect_timeout": socket_timeout,
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
    return {k: v for k, v in parsed.items() if k in SSL_OPTIONS}
