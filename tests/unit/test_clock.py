"""Redis' clock in the scripts (ScriptClock) and in what a worker stamps (RedisTime)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from spiders_project.plumbing.clock import RedisTime, ScriptClock


def test_the_scripts_read_redis_clock_unless_a_test_sets_one():
    clock = ScriptClock()
    assert clock.arg() == ""
    with pytest.raises(RuntimeError):
        clock.advance(1)
    clock.set(1_000)
    clock.advance(500)
    assert clock.arg() == 1_500


def test_a_node_an_hour_ahead_stamps_redis_time():
    local = [7_200.0]  # this node's clock, an hour ahead of Redis' 3,600
    clock = RedisTime(lambda: local[0])
    assert clock.now() == 7_200.0 and not clock.known  # its own until Redis answers
    # TIME asked at 7,200.0, answered at 7,200.2: Redis said 3,600.1 halfway.
    clock.observe(3_600.1, 7_200.0, 7_200.2)
    assert clock.known and clock.offset == pytest.approx(-3_600.0)
    local[0] = 7_260.0
    assert clock.now() == pytest.approx(3_660.0)
    assert clock.now_datetime() == datetime.fromtimestamp(3_660.0, UTC)
