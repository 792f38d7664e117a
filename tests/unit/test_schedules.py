"""Schedules' cron arithmetic and stored entries (jobs/schedules.py), without Redis."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from spiders_project.jobs.schedules import (
    InvalidSchedule,
    Schedule,
    check_cron,
    latest_tick,
    next_tick,
)
from spiders_project.jobs.submit import JobSpec

DAY = 86_400_000


def ms(*args: int) -> int:
    return int(datetime(*args, tzinfo=UTC).timestamp() * 1000)


def test_the_latest_tick_is_at_or_before_now_in_utc():
    three = ms(2026, 11, 27, 3, 0)
    assert latest_tick("0 3 * * *", three) == three
    assert latest_tick("0 3 * * *", three - 1) == three - DAY
    assert latest_tick("0 3 * * *", three + 5 * 60_000) == three
    assert next_tick("0 3 * * *", three) == three + DAY
    assert next_tick("0 3 * * *", three - 1) == three


def test_a_schedule_is_due_once_per_tick_and_missed_ticks_collapse_into_the_latest():
    three = ms(2026, 11, 27, 3, 0)
    schedule = Schedule("0 3 * * *", JobSpec("n", ("http://h/",)), tick=three - 60_000)
    assert schedule.due(three - 1) is None  # scheduled after the day before's tick
    assert schedule.due(three) == three
    ran = Schedule(schedule.cron, schedule.spec, tick=three)
    assert ran.due(three + 1000) is None
    # Three days down: one run, for the latest tick.
    assert ran.due(three + 3 * DAY + 10) == three + 3 * DAY


@pytest.mark.parametrize("cron", ["0 3 * *", "61 * * * *", "every day", "", "0 3 * * * * * *"])
def test_a_bad_cron_expression_says_why(cron):
    with pytest.raises(InvalidSchedule, match="bad cron expression"):
        check_cron(cron)


def test_a_stored_schedule_round_trips_and_a_bad_one_is_refused():
    schedule = Schedule("*/5 * * * *", JobSpec("n", ("http://h/",), max_pages=9), tick=123)
    assert Schedule.from_json("n", schedule.to_json().encode()) == schedule
    for raw, reason in [
        (b"\x80\x04pickle", "not JSON"),
        (b"[1]", "not a JSON object"),
        (b'{"tick": 1, "urls": ["http://h/"]}', "cron"),
        (b'{"cron": "0 3 * * *", "urls": ["http://h/"]}', "tick"),
        (b'{"cron": "0 3 * *", "tick": 1, "urls": ["http://h/"]}', "bad cron"),
        (b'{"cron": "0 3 * * *", "tick": 1, "urls": ["nope"]}', "scheme"),
    ]:
        with pytest.raises(InvalidSchedule, match=reason):
            Schedule.from_json("n", raw)
