"""The rule of the ``redis`` marker: a unit test that needs a redis-server says so.

A redis-server is the one outside process a unit test may use, and the
fixtures of tests/conftest.py are the way to get one: each of the names in
``REDIS_FIXTURES`` starts the session's private server (``redis_proc``,
``redisdb``, ``redis_url``, ``r``) or one of the test's own (``start_redis``;
a unit test that needs a server of its own starts it through that fixture,
never by hand). A unit test that uses one of them carries
``@pytest.mark.redis``, so ``pytest tests/unit -m "not redis"`` runs without
any server and a reader sees the dependency at the test. tests/unit/conftest.py
fails the setup of a unit test that forgets it.
"""

from __future__ import annotations

from collections.abc import Iterable

REDIS_FIXTURES = frozenset({"redis_proc", "redisdb", "redis_url", "r", "start_redis"})


def missing_redis_marker(fixtures: Iterable[str], marked: bool) -> str | None:
    """Why a test with these fixtures must carry the ``redis`` marker, or None if it is fine."""
    used = sorted(REDIS_FIXTURES.intersection(fixtures))
    if not used or marked:
        return None
    return f"uses a redis-server ({', '.join(used)}) without @pytest.mark.redis: add the marker"
