"""The unit tests' one rule checked by pytest: a test that needs a redis-server is marked.

The rule and its fixtures are in tests/support/markers.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.markers import missing_redis_marker

# Files other changes of issue 25 hold: their tests that use a redis-server
# are marked from here until their own ``@pytest.mark.redis`` lands (then
# remove the file from this set).
MARKED_HERE = frozenset({"test_batcher.py"})
UNIT = Path(__file__).parent


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects by the markers
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        held = item.path.parent == UNIT and item.path.name in MARKED_HERE
        if held and missing_redis_marker(getattr(item, "fixturenames", ()), False):
            item.add_marker(pytest.mark.redis)


@pytest.hookimpl(tryfirst=True)  # before the fixtures start a server
def pytest_runtest_setup(item: pytest.Item) -> None:
    marked = item.get_closest_marker("redis") is not None
    why = missing_redis_marker(getattr(item, "fixturenames", ()), marked)
    if why is not None:
        pytest.fail(f"{item.nodeid} {why}", pytrace=False)
