"""Crawl jobs against a real redis-server: ``scrapy jobs`` and the schedules' tick script.

The command runs as an operator runs it (``scrapy jobs ...``, a process of its
own); the tick script is called as every worker's schedule loop calls it, at
times the test passes as ``now`` (no sleeping across a tick).
"""

from __future__ import annotations

import asyncio
import json
import logging
from datetime import UTC, datetime

import pytest
from scrapy.statscollectors import MemoryStatsCollector

from spiders_project.jobs.schedules import JobSchedules, Schedule, tick_call, tick_script
from spiders_project.jobs.submit import JobSpec
from spiders_project.scope.seeds import parse_seed
from spiders_project.spiders.distributed import DistributedSpider
from tests.support.crawlers import project_crawler
from tests.support.processes import K, scrapy_command

DAY = 86_400_000
THREE = int(datetime(2030, 1, 2, 3, 0, tzinfo=UTC).timestamp() * 1000)


def jobs(redis_url, *argv):
    return scrapy_command(redis_url, "jobs", *argv)


def events(r) -> list[dict[str, str]]:
    return [
        {k.decode(): v.decode() for k, v in fields.items()} for _, fields in r.xrange(K.jobs_events)
    ]


def test_submit_writes_the_jobs_seeds_its_record_and_one_event(redis_url, r):
    done = jobs(
        redis_url,
        "submit",
        "shop-x",
        "http://a.example/",
        "http://b.example/",
        "--max-pages",
        "50",
        "--max-depth",
        "3",
        "--deny",
        r"\?print=",
        "--priority",
        "4",
        "--json",
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["id"] == "shop-x" and out["state"] == "running" and out["seeds"] == 2
    assert out["key"] == K.start_urls and out["started_at"].startswith("20")
    # Read from the right, as workers read them: first URL first.
    seeds = [parse_seed(raw) for raw in reversed(r.lrange(K.start_urls, 0, -1))]
    assert [s.url for s in seeds] == ["http://a.example/", "http://b.example/"]
    assert {s.job for s in seeds} == {"shop-x"} and {s.priority for s in seeds} == {4}
    # One budget for the job: both seeds count against one page counter.
    assert seeds[0].scope["id"] == seeds[1].scope["id"]
    assert seeds[0].scope["id"].startswith(f"job.shop-x.{out['run']}.")
    record = json.loads(r.hget(K.jobs, "shop-x"))
    assert record["state"] == "running" and record["run"] == out["run"]
    assert record["seeds"] == ["http://a.example/", "http://b.example/"]
    assert record["options"] == {
        "max_pages": 50,
        "max_depth": 3,
        "deny": [r"\?print="],
        "priority": 4,
    }
    assert isinstance(record["started_at"], int)
    [event] = events(r)
    assert event["job"] == "shop-x" and event["state"] == "running" and event["seeds"] == "2"
    assert event["run"] == out["run"] and event["via"] == "submit"
    # Without --json: one line.
    again = jobs(redis_url, "submit", "shop-x", "http://c.example/")
    assert again.returncode == 0 and len(again.stdout.splitlines()) == 1
    assert "Job shop-x submitted" in again.stdout
    assert len(events(r)) == 2 and r.llen(K.start_urls) == 3


def test_bad_jobs_are_refused_with_one_line_and_status_2_before_redis(redis_url, r):
    for argv, reason in [
        (("schedule", "n", "--cron", "0 3 * *", "http://a/"), "bad cron expression"),
        (("schedule", "n", "--cron", "61 3 * * *", "http://a/"), "bad cron expression"),
        (("submit", "a b", "http://a/"), "job must be"),
        (("submit", "n", "mailto:x@y"), "scheme"),
        (("submit", "n", "http://a/", "--allow", "("), "bad regex"),
        (("unschedule", "n/1"), "job must be"),
    ]:
        done = jobs(redis_url, *argv)
        assert done.returncode == 2, (argv, done.stdout, done.stderr)
        assert done.stderr.splitlines() == [done.stderr.strip()] and reason in done.stderr
    assert r.keys("*") == []


def test_schedule_and_unschedule(redis_url, r):
    done = jobs(redis_url, "schedule", "nightly", "--cron", "0 3 * * *", "http://a/", "--json")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["cron"] == "0 3 * * *" and out["next_run"].endswith("T03:00:00+00:00")
    schedule = Schedule.from_json("nightly", r.hget(K.job_schedules, "nightly"))
    assert schedule.spec.urls == ("http://a/",) and schedule.tick > 0
    # Scheduling is not running: nothing is seeded until a tick.
    assert r.llen(K.start_urls) == 0 and not r.exists(K.jobs_events)
    gone = jobs(redis_url, "unschedule", "nightly", "--json")
    assert json.loads(gone.stdout) == {"id": "nightly", "removed": True}
    assert not r.hexists(K.job_schedules, "nightly")
    again = jobs(redis_url, "unschedule", "nightly")
    assert again.returncode == 0 and "had no schedule" in again.stdout


def run_tick(r, raw: bytes, now: int) -> int:
    """One worker's look at the schedule it read as ``raw``, at ``now``: the script's answer."""
    schedule = Schedule.from_json("nightly", raw)
    tick = schedule.due(now)
    if tick is None:
        return 0
    keys, args = tick_call(K, schedule, raw, tick, events_max=100, now=now)
    return int(r.eval(tick_script().source, len(keys), *keys, *args))


def test_each_tick_runs_once_whoever_looks_and_missed_ticks_run_once(r):
    spec = JobSpec("nightly", ("http://a/",), max_pages=10)
    r.hset(K.job_schedules, "nightly", Schedule("0 3 * * *", spec, THREE - 3_600_000).to_json())
    # Three workers read the entry before the tick and look at it after.
    raw = r.hget(K.job_schedules, "nightly")
    assert run_tick(r, raw, THREE - 1) == 0  # not due yet
    assert [run_tick(r, raw, THREE + 5) for _ in range(3)] == [1, 0, 0]
    assert r.llen(K.start_urls) == 1
    # A worker reading the entry now finds the tick run.
    assert run_tick(r, r.hget(K.job_schedules, "nightly"), THREE + 900) == 0
    # A worker whose clock runs a day ahead cannot run tomorrow's tick today:
    # the script checks the tick against its own now.
    fresh = r.hget(K.job_schedules, "nightly")
    tomorrow = Schedule.from_json("nightly", fresh)
    keys, args = tick_call(K, tomorrow, fresh, THREE + DAY, events_max=100, now=THREE + 60)
    assert r.eval(tick_script().source, len(keys), *keys, *args) == -1
    # The cluster was down for three days: one run, for the latest tick.
    later = THREE + 3 * DAY + 30_000
    assert [run_tick(r, r.hget(K.job_schedules, "nightly"), later) for _ in range(3)] == [1, 0, 0]
    ticks = [int(e["at"]) for e in events(r)]
    assert ticks == [THREE + 5, later]
    assert [e["via"] for e in events(r)] == ["schedule", "schedule"]
    record = json.loads(r.hget(K.jobs, "nightly"))
    assert record["tick"] == THREE + 3 * DAY and record["started_at"] == later
    # Each run has a budget of its own.
    first, second = (parse_seed(raw).scope["id"] for raw in r.lrange(K.start_urls, 0, -1))
    assert first != second
    # Unscheduled between a worker's read and its call: nothing runs.
    stale = r.hget(K.job_schedules, "nightly")
    r.hdel(K.job_schedules, "nightly")
    assert run_tick(r, stale, THREE + 4 * DAY) == 0
    assert r.llen(K.start_urls) == 2


def test_a_worker_skips_an_unreadable_schedule_with_one_line_and_runs_the_others(
    redis_url, r, tmp_path, caplog
):
    clock = tmp_path / "clock"
    clock.write_text(str(THREE + 1000))
    crawler = project_crawler(
        DistributedSpider, {"REDIS_URL": redis_url, "JOBS_SCHEDULE_TEST_CLOCK": str(clock)}
    )
    crawler.stats = crawler.stats or MemoryStatsCollector(crawler)
    spec = JobSpec("good", ("http://a/",))
    r.hset(K.job_schedules, "good", Schedule("0 3 * * *", spec, THREE - 60_000).to_json())
    r.hset(K.job_schedules, "pickled", b"\x80\x04\x95cos\nsystem\n")
    r.hset(K.job_schedules, "bad-cron", '{"cron": "0 3 * *", "tick": 0, "urls": ["http://a/"]}')
    r.hset(
        K.job_schedules,
        "latin-1",
        '{"cron": "0 3 * * *", "tick": 0, "urls": ["http://\xe9/"]}'.encode("latin-1"),
    )
    schedules = JobSchedules.from_crawler(crawler)

    async def looks() -> list[int]:
        try:
            return [await schedules.check() for _ in range(3)]
        finally:
            await schedules.redis.aclose()

    with caplog.at_level(logging.ERROR, logger="spiders_project.jobs.schedules"):
        ran = asyncio.run(looks())
    assert ran == [1, 0, 0]
    assert scheduled_jobs(r) == ["good"]
    # One line per unreadable schedule, not one per look.
    skipped = [rec.getMessage() for rec in caplog.records]
    assert len(skipped) == 3, skipped
    assert all("Skipping the schedule of job" in line for line in skipped)
    assert crawler.stats.get_value("jobs/schedules_invalid") == 3
    assert crawler.stats.get_value("jobs/schedule_checks") == 3


def scheduled_jobs(r) -> list[str]:
    return [event["job"] for event in events(r) if event["via"] == "schedule"]


def test_on_redis_clock_a_due_tick_runs_at_the_first_look_and_once(redis_url, r):
    """No test clock: the loop reads Redis' TIME and the script its own, as in production."""
    crawler = project_crawler(DistributedSpider, {"REDIS_URL": redis_url})
    crawler.stats = crawler.stats or MemoryStatsCollector(crawler)
    seconds, _ = r.time()
    now = seconds * 1000
    every_minute = Schedule("* * * * *", JobSpec("minutely", ("http://a/",)), now - 120_000)
    r.hset(K.job_schedules, "minutely", every_minute.to_json())
    # Scheduled in a minute to come (a clock far ahead would put it there): nothing runs.
    later = Schedule("* * * * *", JobSpec("later", ("http://b/",)), now + 3_600_000)
    r.hset(K.job_schedules, "later", later.to_json())
    schedules = JobSchedules.from_crawler(crawler)

    async def looks() -> list[int]:
        try:
            return [await schedules.check() for _ in range(2)]
        finally:
            await schedules.redis.aclose()

    assert asyncio.run(looks()) == [1, 0]
    assert scheduled_jobs(r) == ["minutely"]
    [event] = events(r)
    tick = json.loads(r.hget(K.jobs, "minutely"))["tick"]
    assert tick % 60_000 == 0 and now - 60_000 < tick <= int(event["at"])


@pytest.mark.parametrize(
    ("recrawl", "cron", "after", "warned"),
    [
        ("3600", "0 3 * * *", 43200, None),
        # No times in the seen-set: the seeds must not ask for them (refused).
        ("0", "0 3 * * *", None, "fetches only its seeds again"),
        # A unit of 45 h for runs an hour apart: said once, still run.
        ("2592000", "0 * * * *", 1800, "a run may fetch a page twice"),
    ],
)
def test_a_scheduled_runs_seeds_recrawl_half_an_interval_with_a_timed_seen_set(
    redis_url, r, tmp_path, caplog, recrawl, cron, after, warned
):
    clock = tmp_path / "clock"
    crawler = project_crawler(
        DistributedSpider,
        {"REDIS_URL": redis_url, "JOBS_SCHEDULE_TEST_CLOCK": str(clock), "RECRAWL_AFTER": recrawl},
    )
    crawler.stats = crawler.stats or MemoryStatsCollector(crawler)
    spec = JobSpec("again", ("http://a/", "http://b/"))
    r.hset(K.job_schedules, "again", Schedule(cron, spec, THREE - 60_000).to_json())
    schedules = JobSchedules.from_crawler(crawler)

    async def looks() -> list[int]:
        try:
            ran = []
            for now in (THREE + 1000, THREE + DAY + 1000):
                clock.write_text(str(now))
                ran.append(await schedules.check())
            return ran
        finally:
            await schedules.redis.aclose()

    with caplog.at_level(logging.WARNING, logger="spiders_project.jobs.schedules"):
        assert asyncio.run(looks()) == [1, 1]
    seeds = [parse_seed(raw) for raw in r.lrange(K.start_urls, 0, -1)]
    assert len(seeds) == 4
    assert {s.scope.get("recrawl_after") for s in seeds} == {after}
    assert json.loads(r.hget(K.jobs, "again")).get("recrawl_after") == after
    # Said once, not once a run.
    lines = [rec.getMessage() for rec in caplog.records]
    assert [warned in line for line in lines] == ([True] if warned else []), lines
