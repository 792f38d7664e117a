"""Redis clients built from settings, and the one-line error when Redis is away.

Workers talk to Redis with ``redis.asyncio`` on Scrapy's asyncio reactor, so
no Redis call ever blocks the event loop; the db_writer and the commands use
the synchronous client. Both get the same URL, timeouts and no hidden retry
loop: redis-py's default retry sleeps synchronously, and every error is
classified, retried with backoff and logged once per state change by the one
call path of each process (``spiders_project.redis_calls``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import redis
import redis.asyncio
from redis.connection import parse_url
from scrapy.settings import BaseSettings

from spiders_project.config import SettingsReader


@dataclass(frozen=True)
class RedisConfig:
    """How every process reaches Redis: ``REDIS_URL``, its timeout and reconnect backoff."""

    url: str
    socket_timeout: float
    backoff: float
    backoff_max: float

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
        backoff = read.getfloat("REDIS_RECONNECT_BACKOFF", above=0)
        return cls(
            url=url,
            socket_timeout=read.getfloat("REDIS_SOCKET_TIMEOUT", above=0),
            backoff=backoff,
            backoff_max=read.getfloat("REDIS_RECONNECT_BACKOFF_MAX", minimum=backoff),
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


def sync_client(settings: BaseSettings) -> redis.Redis:
    """A blocking client for processes that own their thread (db_writer, commands)."""
    config = RedisConfig.from_settings(settings)
    return redis.Redis.from_url(config.url, **_client_kwargs(config))


def async_client(settings: BaseSettings) -> redis.asyncio.Redis:
    """A client for code running on the worker's asyncio reactor."""
    config = RedisConfig.from_settings(settings)
    return redis.asyncio.Redis.from_url(config.url, **_client_kwargs(config))


def unreachable_message(settings: BaseSettings, exc: BaseException) -> str:
    """The single line printed when Redis cannot be reached at start."""
    return (
        f"cannot connect to Redis at {mask_url(settings.get('REDIS_URL'))}: "
        f"{type(exc).__name__}: {exc}"
    )


def ping_or_message(settings: BaseSettings) -> str | None:
    """None if Redis answers PING, else the line that says why not."""
    client = sync_client(settings)
    try:
        client.ping()
    except (redis.RedisError, OSError) as exc:
        return unreachable_message(settings, exc)
    finally:
        client.close()
    return None
