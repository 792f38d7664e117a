"""The redis marker's rule (tests/support/markers.py): a test that needs a server says so."""

from __future__ import annotations

import tests.conftest
from tests.support.markers import REDIS_FIXTURES, missing_redis_marker


def test_a_test_with_a_server_fixture_and_no_marker_is_refused_with_the_fixtures_named():
    why = missing_redis_marker(["tmp_path", "redis_url", "r"], marked=False)
    assert why is not None and "(r, redis_url)" in why and "@pytest.mark.redis" in why
    assert missing_redis_marker(["start_redis"], marked=False) is not None


def test_a_marked_test_or_one_without_a_server_passes():
    assert missing_redis_marker(["redis_url", "r"], marked=True) is None
    assert missing_redis_marker(["tmp_path", "caplog"], marked=False) is None


def test_the_rule_names_the_fixtures_that_start_a_server():
    # A renamed fixture would silently leave the rule behind.
    assert all(hasattr(tests.conftest, name) for name in REDIS_FIXTURES)
