"""Fixtures that start real processes on free ports and stop them afterwards.

Nothing here touches the Redis or PostgreSQL that may already run on this
machine: each session starts its own redis-server (pytest-redis), and
``redisdb`` empties that private server after every test.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis
from pytest_redis import factories

redis_proc = factories.redis_proc(port=None)
redisdb = factories.redisdb("redis_proc")


@pytest.fixture
def redis_url(redisdb, redis_proc) -> Iterator[str]:
    """URL of an empty private Redis (db 0), flushed after the test."""
    yield f"redis://{redis_proc.host}:{redis_proc.port}/0"


@pytest.fixture
def r(redis_url):
    """A client of the private Redis of this test."""
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


@pytest.fixture
def procs():
    """Append the processes a test starts; any still running are killed after it."""
    started: list = []
    yield started
    for p in started:
        p.close()
