"""Fixtures that start real processes on free ports and stop them afterwards.

Nothing here touches the Redis or PostgreSQL that may already run on this
machine: each session starts its own redis-server (pytest-redis), and
``redisdb`` empties that private server after every test.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis
from mirakuru import TCPExecutor
from pytest_redis import factories

from tests.support.services import RedisServer
from tests.support.tls import Pki, make_pki

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


@pytest.fixture
def start_redis(tmp_path):
    """Start a redis-server of the test's own, on a free port; stopped after the test.

    For tests that restart or reconfigure Redis (maxmemory, REPLICAOF,
    persistence), which they must never do to a server they did not start.
    ``start_redis("--appendonly", "yes")`` adds options (a later option wins
    over the defaults: no persistence, data in the test's folder) and returns
    mirakuru's executor (to stop and start it again) and the server's URL.
    """
    started: list[RedisServer] = []

    def start(*options: str) -> tuple[TCPExecutor, str]:
        server = RedisServer(*options, datadir=tmp_path / f"redis-{len(started)}")
        started.append(server)
        return server.executor, server.url

    yield start
    for server in started:
        server.stop()


@pytest.fixture(scope="session")
def pki(tmp_path_factory) -> Pki:
    """One private CA with server, wrong-name and client certificates for the
    session's TLS tests (tests/support/tls.py; about a second of openssl)."""
    return make_pki(tmp_path_factory.mktemp("pki"))
