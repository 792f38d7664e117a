"""Schedules' cron arithmetic and stored entries (jobs/schedules.py), without Redis."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from spiders_project.jobs.schedules import (
    InvalidSchedule,
    Schedule,
    check_cron,
    latest_tick,
    next_tick,
    run_recrawl_after,
    tick_call,
)
from spiders_project.jobs.submit import JobSpec
from spiders_project.keys import RedisKeys
from spiders_project.scope.seeds import parse_seed

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


@pytest.mark.parametrize(
    ("cron", "tick", "seconds"),
    [
        ("0 3 * * *", ms(2026, 11, 27, 3, 0), 12 * 3600),
        # An uneven timetable: half of the time since the tick before each one.
        ("0 3,4 * * *", ms(2026, 11, 27, 4, 0), 1800),
        ("0 3,4 * * *", ms(2026, 11, 27, 3, 0), 23 * 1800),
        ("* * * * * */10", ms(2026, 11, 27, 3, 0, 10), 5),
    ],
)
def test_a_runs_recrawl_after_is_half_its_timetables_interval(cron, tick, seconds):
    assert run_recrawl_after(cron, tick) == seconds


def test_a_tick_puts_the_runs_recrawl_after_on_its_seeds_and_record():
    three = ms(2026, 11, 27, 3, 0)
    spec = JobSpec("n", ("http://a/", "http://b/"), max_pages=9)
    schedule = Schedule("0 3 * * *", spec, tick=three - 60_000)
    raw = schedule.to_json()
    _, args = tick_call(RedisKeys("s"), schedule, raw, three, events_max=5, recrawl_after=43200.0)
    record, entries = json.loads(args[7]), args[-2:]
    assert record["recrawl_after"] == 43200.0 and record["tick"] == three
    seeds = [parse_seed(entry) for entry in entries]
    assert [s.scope["recrawl_after"] for s in seeds] == [43200.0, 43200.0]
    assert seeds[0].scope["id"] == seeds[1].scope["id"]  # still one budget for the run
    # Without it (no RECRAWL_AFTER), the seeds are as before.
    _, plain = tick_call(RedisKeys("s"), schedule, raw, three, events_max=5)
    assert all("recrawl_after" not in json.loads(entry) for entry in plain[-2:])
