"""Fixtures that start real processes on free ports and stop them afterwards.

Nothing here touches the Redis or PostgreSQL that may already run on this
machine: each session starts its own redis-server (pytest-redis), and
``redisdb`` empties that private server after every test.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pytest_redis import factories

redis_proc = factories.redis_proc(port=None)
redisdb = factories.redisdb("redis_proc")


@pytest.fixture
def redis_url(redisdb, redis_proc) -> Iterator[str]:
    """URL of an empty private Redis (db 0), flushed after the test."""
    yield f"redis://{redis_proc.host}:{redis_proc.port}/0"
