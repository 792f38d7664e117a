"""Redis clients built from settings, and the one-line error when Redis is away.

Workers talk to Redis with ``redis.asyncio`` on Scrapy's asyncio reactor, so
no Redis call ever blocks the event loop; the db_writer and the commands use
the synchronous client. Both get the same URL, timeouts and no hidden retry
loop: redis-py's default retry sleeps synchronously, and every error is
classified, retried with backoff and logged once per state change by the one
call path of each process (``spiders_project.redis_access``).

TLS is a ``rediss://`` URL with redis-py's own query parameters
(``ssl_ca_certs``, ``ssl_certfile``, ``ssl_keyfile``, ``ssl_cert_reqs``,
``ssl_check_hostname``): the certificate and its host name are verified
unless the URL says otherwise, and then every process says so once
(docs/SECURITY.md).
"""

from __future__ import annotations

import logging
import os
import ssl
from dataclasses import dataclass
from typing import Any, cast
from urllib.parse import urlsplit, urlunsplit

import redis
import redis.asyncio
import redis.asyncio.sentinel
import redis.cluster
import redis.sentinel
from redis.connection import parse_url
from scrapy.settings import BaseSettings

from spiders_project.config import SettingsReader
from spiders_project.redis_access.cluster import pinned_async_client
from spiders_project.redis_access.sentinel import (
    AsyncFollowingPool,
    FollowingPool,
    SentinelAccess,
    master_kwargs,
    warn_if_unverified,
)

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RedisConfig:
    """How every process reaches Redis: ``REDIS_URL`` (or Sentinel), its timeout,
    reconnect backoff, and the replicas that confirm writes."""

    url: str
    socket_timeout: float
    backoff: float
    backoff_max: float
    sentinels: tuple[tuple[str, int], ...] = ()
    sentinel_master: str = "mymaster"
    wait_replicas: int = 0
    wait_timeout: float = 1.0
    cluster: bool = False
    sentinel_access: SentinelAccess = SentinelAccess()

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> RedisConfig:
        read = SettingsReader(settings)
        url = read.getstr("REDIS_URL")
        try:
            parse_url(url)
        except ValueError as exc:
            # A URL may hold a password: never echo it unmasked.
            try:
                shown = repr(mask_url(url))
            except ValueError:
                shown = "(not shown: it may hold a password)"
            read.fail("REDIS_URL", str(exc).replace(url, "<REDIS_URL>"), shown)
        _check_tls(read, url)
        backoff = read.getfloat("REDIS_RECONNECT_BACKOFF", above=0)
        sentinels = []
        for part in read.getstr("REDIS_SENTINELS").split(","):
            if not part.strip():
                continue
            host, _, port = part.strip().rpartition(":")
            read.check(
                bool(host) and port.isdigit() and 0 < int(port) < 65536,
                "REDIS_SENTINELS",
                f"{part.strip()!r} is not host:port",
            )
            sentinels.append((host.strip("[]"), int(port)))
        cluster = read.getbool("REDIS_CLUSTER")
        read.check(
            not (cluster and sentinels),
            "REDIS_CLUSTER",
            "a Redis Cluster fails over by itself: set REDIS_CLUSTER or REDIS_SENTINELS, not both",
        )
        read.check(
            not cluster or int(parse_url(url).get("db", 0)) == 0,
            "REDIS_CLUSTER",
            "a Redis Cluster has only db 0: REDIS_URL must not name another",
        )
        read.check(
            not cluster or urlsplit(url).scheme in ("redis", "rediss"),
            "REDIS_CLUSTER",
            "a Redis Cluster is reached over TCP: REDIS_URL must be redis:// or rediss://",
        )
        return cls(
            url=url,
            socket_timeout=read.getfloat("REDIS_SOCKET_TIMEOUT", above=0),
            backoff=backoff,
            backoff_max=read.getfloat("REDIS_RECONNECT_BACKOFF_MAX", minimum=backoff),
            sentinels=tuple(sentinels),
            sentinel_master=read.getstr("REDIS_SENTINEL_MASTER"),
            wait_replicas=read.getint("REDIS_WAIT_REPLICAS", minimum=0),
            wait_timeout=read.getfloat("REDIS_WAIT_TIMEOUT", above=0),
            cluster=cluster,
            sentinel_access=SentinelAccess.from_settings(read, url),
        )

    @property
    def where(self) -> str:
        """Where Redis is, for log lines: the URL (password masked), or the sentinels."""
        if self.sentinels:
            listed = ",".join(f"{h}:{p}" for h, p in self.sentinels)
            tls = " over TLS" if self.sentinel_access.tls else ""
            return f"master {self.sentinel_master!r} of sentinels {listed}{tls}"
        if self.cluster:
            return f"Redis Cluster of {mask_url(self.url)}"
        return mask_url(self.url)


# The ssl_cert_reqs redis-py knows, and the ssl_* parameters that name a file.
_CERT_REQS = ("none", "optional", "required")
_TLS_FILES = ("ssl_ca_certs", "ssl_certfile", "ssl_keyfile")


def _check_tls(read: SettingsReader, url: str) -> None:
    """REDIS_URL's TLS parameters, checked before any connection: ssl_* only
    with rediss://, a known ssl_cert_reqs, certificate files that exist."""
    options = parse_url(url)
    shown = repr(mask_url(url))
    given = sorted(name for name in options if name.startswith("ssl_"))
    if given and urlsplit(url).scheme != "rediss":
        read.fail("REDIS_URL", f"{', '.join(given)}: TLS parameters need a rediss:// URL", shown)
    reqs = options.get("ssl_cert_reqs")
    if reqs is not None and reqs not in _CERT_REQS:
        read.fail("REDIS_URL", f"ssl_cert_reqs={reqs}: not one of {', '.join(_CERT_REQS)}", shown)
    for name in _TLS_FILES:
        path = options.get(name)
        if path is not None and not os.path.isfile(str(path)):
            read.fail("REDIS_URL", f"{name}={path}: no such file", shown)


# REDIS_URLs this process has warned about (one line per process, not per client).
_warned: set[str] = set()


def _warn_if_unverified(config: RedisConfig) -> None:
    """One WARNING per process when REDIS_URL turns TLS verification off."""
    options = parse_url(config.url)
    if urlsplit(config.url).scheme != "rediss" or config.url in _warned:
        return
    if options.get("ssl_cert_reqs") == "none":
        risk = (
            "ssl_cert_reqs=none: Redis' certificate is not verified, so anyone on the "
            "network path can pose as Redis"
        )
    elif options.get("ssl_check_hostname") is False:
        risk = (
            "ssl_check_hostname=false: any certificate of the CA is taken for Redis', so "
            "any host holding one can pose as Redis"
        )
    else:
        return
    _warned.add(config.url)
    logger.warning(
        "REDIS_URL %s has %s and read or change every request, item and password this "
        "process sends (docs/SECURITY.md: leave verification on)",
        mask_url(config.url),
        risk,
    )


def mask_url(url: str) -> str:
    """The URL with any password replaced by ``***``, safe for a log line."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))


def _client_kwargs(config: RedisConfig) -> dict[str, Any]:
    timeout = config.socket_timeout
    return {
        "socket_timeout": timeout,
        "socket_connect_timeout": timeout,
        "retry": None,
        "retry_on_timeout": False,
        "health_check_interval": 30,
    }


def _sentinel_kwargs(config: RedisConfig) -> tuple[dict[str, Any], dict[str, Any]]:
    """(kwargs of the sentinels' connections, kwargs of the master's), each in
    full: redis-py copies nothing from one to the other (sentinel.py)."""
    warn_if_unverified(config.sentinel_access, config.url)
    sentinels = config.sentinel_access.kwargs(config.socket_timeout)
    return sentinels, master_kwargs(config.url, _client_kwargs(config))


def sync_client(settings: BaseSettings) -> redis.Redis:
    """A blocking client for processes that own their thread (db_writer, commands)."""
    config = RedisConfig.from_settings(settings)
    _warn_if_unverified(config)
    if config.sentinels:
        # redis-py's Sentinel pool asks the sentinels for the master on every new
        # connection, and drops a connection whose server answers READONLY
        # (a demoted master): our call path's retry then reaches the new one.
        # Ours also asks every second (sentinel.FollowingPool), so a
        # master the sentinels replaced but not yet demoted is left at once.
        sentinel_kwargs, master = _sentinel_kwargs(config)
        sentinel = redis.sentinel.Sentinel(list(config.sentinels), sentinel_kwargs=sentinel_kwargs)
        client: redis.Redis = sentinel.master_for(
            config.sentinel_master, connection_pool_class=FollowingPool, **master
        )
        return client
    if config.cluster:
        # redis-py's cluster client routes each command by its key's slot
        # (and asks the cluster again after a failover); it is not a
        # redis.Redis, but has the commands, pipelines and scripts we call.
        cluster = redis.cluster.RedisCluster.from_url(config.url, **_client_kwargs(config))
        return cast(redis.Redis, cluster)
    return redis.Redis.from_url(config.url, **_client_kwargs(config))


def async_client(settings: BaseSettings, slot_key: str) -> redis.asyncio.Redis:
    """A client for code running on the worker's asyncio reactor.

    ``slot_key``: a key of the slot of every key the caller uses (its
    spider's ``RedisKeys.prefix``); on a Redis Cluster the client goes to the
    master of that slot (cluster.py).
    """
    config = RedisConfig.from_settings(settings)
    _warn_if_unverified(config)
    if config.cluster:
        return pinned_async_client(config.url, slot_key, _client_kwargs(config))
    if config.sentinels:
        sentinel_kwargs, master = _sentinel_kwargs(config)
        sentinel = redis.asyncio.sentinel.Sentinel(
            list(config.sentinels), sentinel_kwargs=sentinel_kwargs
        )
        aclient: redis.asyncio.Redis = sentinel.master_for(
            config.sentinel_master, connection_pool_class=AsyncFollowingPool, **master
        )
        return aclient
    return redis.asyncio.Redis.from_url(config.url, **_client_kwargs(config))


def unreachable_message(settings: BaseSettings, exc: BaseException) -> str:
    """The single line printed when Redis cannot be reached at start."""
    where = RedisConfig.from_settings(settings).where
    problem = tls_problem(exc)
    if problem is not None:
        return f"cannot connect to Redis at {where}: {problem} ({type(exc).__name__}: {exc})"
    return f"cannot connect to Redis at {where}: {type(exc).__name__}: {exc}"


def tls_problem(exc: BaseException) -> str | None:
    """What a TLS failure in ``exc`` means for the operator, or None.

    redis-py wraps the ssl error in its ConnectionError (a cluster client in
    a RedisClusterException's text only), so both the chain and the text are read.
    """
    chain: list[BaseException] = []
    cause: BaseException | None = exc
    while cause is not None and cause not in chain:
        chain.append(cause)
        cause = cause.__cause__ or cause.__context__
    verify = [e for e in chain if isinstance(e, ssl.SSLCertVerificationError)]
    if verify or "CERTIFICATE_VERIFY_FAILED" in str(exc):
        reason = f" ({verify[0].verify_message})" if verify else ""
        return (
            f"TLS certificate problem: Redis' certificate was refused{reason}; check "
            "ssl_ca_certs, and that the certificate names the host REDIS_URL gives"
        )
    if any(isinstance(e, ssl.SSLError) for e in chain) or "_ssl.c" in str(exc):
        return (
            "TLS problem: the handshake failed or Redis closed the connection; if Redis "
            "asks for client certificates (tls-auth-clients), give ssl_certfile and ssl_keyfile"
        )
    return None


def ping_or_message(settings: BaseSettings) -> str | None:
    """None if Redis answers PING, else the line that says why not."""
    try:
        # A cluster client asks the cluster for its slots as it is built.
        client = sync_client(settings)
    except (redis.RedisError, redis.exceptions.RedisClusterException, OSError) as exc:
        return unreachable_message(settings, exc)
    try:
        client.ping()
    except (redis.RedisError, OSError) as exc:
        return unreachable_message(settings, exc)
    finally:
        client.close()
    return None
