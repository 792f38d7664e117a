"""The unit tests' one rule checked by pytest: a test that needs a redis-server is marked.

The rule and its fixtures are in tests/support/markers.py.
"""

from __future__ import annotations

import pytest

from tests.support.markers import missing_redis_marker


@pytest.hookimpl(tryfirst=True)  # before the fixtures start a server
def pytest_runtest_setup(item: pytest.Item) -> None:
    marked = item.get_closest_marker("redis") is not None
    why = missing_redis_marker(getattr(item, "fixturenames", ()), marked)
    if why is not None:
        pytest.fail(f"{item.nodeid} {why}", pytrace=False)
