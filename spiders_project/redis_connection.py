"""Redis clients built from settings, and the one-line error when Redis is away.

Workers talk to Redis with ``redis.asyncio`` on Scrapy's asyncio reactor, so
no Redis call ever blocks the event loop; the db_writer and the commands use
the synchronous client. Both get the same URL, timeouts and no hidden retry
loop: redis-py's default retry sleeps synchronously, and reconnection is
handled (with backoff and one log line per state change) by our callers.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit, urlunsplit

import redis
import redis.asyncio
from scrapy.settings import BaseSettings


def mask_url(url: str) -> str:
    """The URL with any password replaced by ``***``, safe for a log line."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))


def _client_kwargs(settings: BaseSettings) -> dict[str, Any]:
    timeout = settings.getfloat("REDIS_SOCKET_TIMEOUT")
    return {
        "socket_timeout": timeout,
        "socket_connect_timeout": timeout,
        "retry": None,
        "retry_on_timeout": False,
        "health_check_interval": 30,
    }


def sync_client(settings: BaseSettings) -> redis.Redis:
    """A blocking client for processes that own their thread (db_writer, commands)."""
    return redis.Redis.from_url(settings.get("REDIS_URL"), **_client_kwargs(settings))


def async_client(settings: BaseSettings) -> redis.asyncio.Redis:
    """A client for code running on the worker's asyncio reactor."""
    return redis.asyncio.Redis.from_url(settings.get("REDIS_URL"), **_client_kwargs(settings))


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


# Errors after which a call may succeed once Redis is back.
CONNECTION_ERRORS: tuple[type[BaseException], ...] = (
    redis.ConnectionError,
    redis.TimeoutError,
    redis.BusyLoadingError,
    ConnectionError,
    OSError,
)
