"""Crawl jobs on real workers: one budget for a whole job, and schedules run once a tick.

Real ``scrapy crawl distributed`` workers, the local test site and ``scrapy
jobs`` as an operator runs it. The schedules run on a clock the test steps
(``JOBS_SCHEDULE_TEST_CLOCK``, a file every worker's loop reads at each look),
so no test waits for 03:00.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.support.processes import K, Proc, scrapy_command, stat, wait_until, worker
from tests.support.site import TestSite

pytestmark = pytest.mark.slow

DAY = 86_400_000
CHECKS = "jobs/schedule_checks"


def test_a_jobs_max_pages_is_one_budget_across_its_seeds_and_workers(redis_url, r, tmp_path, procs):
    with TestSite(
        pages=200, seed=27, hosts=2, latency=0.05, offsite_links=False, dead_links=False
    ) as site:
        # Both workers are up before the job comes, and each fetches 4 pages
        # at a time, so both take part.
        workers = [
            worker(
                f"w{i}",
                redis_url,
                tmp_path,
                # They stay up until stopped: under load a command can take
                # longer to start than a short idle time (both closed, 0 pages).
                "MAX_IDLE_TIME_BEFORE_CLOSE=0",
                "JOB_FINISH_GRACE=2",
                "CONCURRENT_REQUESTS=4",
                "STATS_PUBLISH_INTERVAL=0.5",
                "STATS_HEARTBEAT_TTL=3",
            )
            for i in range(2)
        ]
        procs += workers
        wait_until(lambda: r.zcard(K.workers) == 2, 90, what="both workers to start")
        done = scrapy_command(
            redis_url, "jobs", "submit", "budget", *site.urls, "--max-pages", "50"
        )
        assert done.returncode == 0, done.stderr
        waited = scrapy_command(
            redis_url, "jobs", "wait", "budget", "--timeout", "150", timeout=170
        )
        assert waited.returncode == 0, waited.stdout + waited.stderr
        for w in workers:
            assert w.stop(60) == 0, w.log()[-3000:]
        pages = [path for _, _, path, _ in site.request_log() if path != "/robots.txt"]
    assert len(pages) == 50
    # Both workers fetched (20-32 pages each in our runs): the budget held across them.
    assert all(stat(r, w, "response_received_count") > 0 for w in workers)
    assert len({host for _, host, _, _ in site.request_log()}) == 2  # both seeds' sites


def next_three_am(now: datetime) -> int:
    """The first 03:00 UTC more than a minute after ``now``, in ms.

    The next one, never a later one: ``jobs schedule`` runs on the real clock,
    so the schedule's last tick is the 03:00 before ``now``. A test clock past
    a second 03:00 would find that one missed, and run it (the first version
    took "a day after" and failed when run between 00:00 and 03:00 UTC).
    """
    today = datetime(now.year, now.month, now.day, 3, tzinfo=UTC)
    three = today if today - now > timedelta(minutes=1) else today + timedelta(days=1)
    return int(three.timestamp() * 1000)


def scheduled_runs(r) -> list[str]:
    """The run id of each job run the schedule started ("t<tick in s>"), in order."""
    runs = []
    for _, fields in r.xrange(K.jobs_events):
        event = {k.decode(): v.decode() for k, v in fields.items()}
        if event["via"] == "schedule":
            runs.append(event["run"])
    return runs


def test_three_workers_run_each_tick_once_and_a_missed_tick_once(redis_url, r, tmp_path, procs):
    clock = tmp_path / "clock"
    three = next_three_am(datetime.now(UTC))

    def set_clock(ms: int) -> None:
        tmp = clock.with_suffix(".new")
        tmp.write_text(str(ms))
        tmp.replace(clock)  # a worker never reads half a time

    def start(name: str) -> Proc:
        w = worker(
            name,
            redis_url,
            tmp_path,
            f"JOBS_SCHEDULE_TEST_CLOCK={clock}",
            "JOBS_SCHEDULE_INTERVAL=0.2",
            "STATS_PUBLISH_INTERVAL=0.5",
            "STATS_HEARTBEAT_TTL=3",
        )
        procs.append(w)
        return w

    def looked(workers: list[Proc], times: int) -> None:
        """Wait until each worker's loop has looked ``times`` more times than now."""
        since = {w.pid: stat(r, w, CHECKS) for w in workers}
        wait_until(
            lambda: all(stat(r, w, CHECKS) >= since[w.pid] + times for w in workers),
            90,
            what="every worker's schedule loop to look again",
        )

    set_clock(three - 1000)
    with TestSite(pages=20, seed=28, offsite_links=False, dead_links=False) as site:
        done = scrapy_command(
            redis_url,
            "jobs",
            "schedule",
            "nightly",
            "--cron",
            "0 3 * * *",
            site.url,
            "--max-pages",
            "5",
        )
        assert done.returncode == 0, done.stderr
        workers = [start(f"w{i}") for i in range(3)]
        looked(workers, 3)
        assert scheduled_runs(r) == []  # 02:59:59: not yet

        set_clock(three + 500)
        wait_until(lambda: scheduled_runs(r), 60, what="the 03:00 tick to run")
        looked(workers, 5)
        assert scheduled_runs(r) == [f"t{three // 1000}"]

        # A worker restarted after the tick does not run it again.
        assert workers[0].stop() == 0
        workers[0] = start("w0-again")
        looked(workers, 5)
        set_clock(three + 3_600_000)  # 04:00: still the same day's tick
        looked(workers, 5)
        assert scheduled_runs(r) == [f"t{three // 1000}"]

        # The whole cluster is down for three days: one run when it is back.
        for w in workers:
            assert w.stop() == 0, w.log()[-3000:]
        set_clock(three + 3 * DAY + 2000)
        workers = [start(f"w{i}-back") for i in range(3)]
        wait_until(lambda: len(scheduled_runs(r)) == 2, 90, what="the missed tick to run")
        looked(workers, 5)
        assert scheduled_runs(r) == [f"t{three // 1000}", f"t{(three + 3 * DAY) // 1000}"]
        assert sum(stat(r, w, "jobs/scheduled_runs") for w in workers) == 1
        record = json.loads(r.hget(K.jobs, "nightly"))
        assert record["via"] == "schedule" and record["tick"] == three + 3 * DAY
        # Each run's seed was crawled.
        wait_until(
            lambda: sum(1 for _, _, path, _ in site.request_log() if path == "/") >= 2,
            60,
            what="both runs' seeds to be fetched",
        )
        for w in workers:
            assert w.stop() == 0, w.log()[-3000:]
            assert "schedules failed" not in w.log() and "Skipping the schedule" not in w.log()


def test_a_worker_an_hour_ahead_runs_ticks_on_redis_clock_not_its_own(
    redis_url, r, tmp_path, procs
):
    """No test clock: real ticks every 15 s (croniter's seconds field), and one
    worker whose clock libfaketime moves an hour ahead. On its own clock every
    tick of the next hour would look due at once; on Redis' each runs once, on time."""
    (libfaketime,) = Path("/usr/lib").glob("*/faketime/libfaketime.so.1")
    ahead = {"LD_PRELOAD": str(libfaketime), "FAKETIME": "+1h", "FAKETIME_NO_CACHE": "1"}
    fast = ("JOBS_SCHEDULE_INTERVAL=0.2", "STATS_PUBLISH_INTERVAL=0.5", "STATS_HEARTBEAT_TTL=3")
    with TestSite(pages=5, seed=29, offsite_links=False, dead_links=False) as site:
        workers = [
            worker("normal", redis_url, tmp_path, *fast),
            worker("ahead", redis_url, tmp_path, *fast, env=ahead),
        ]
        procs += workers
        wait_until(
            lambda: all(stat(r, w, CHECKS) >= 2 for w in workers), 90, what="both loops to look"
        )

        def redis_ms() -> int:
            seconds, micros = r.time()
            return seconds * 1000 + micros // 1000

        # Schedule early in a 15 s period, so both loops look many times before its tick.
        wait_until(lambda: redis_ms() % 15_000 < 5_000, 20, what="a new 15 s period")
        cron = "* * * * * */15"
        done = scrapy_command(redis_url, "jobs", "schedule", "skew", "--cron", cron, site.url)
        assert done.returncode == 0, done.stderr
        first = (redis_ms() // 15_000 + 1) * 15_000
        wait_until(lambda: redis_ms() >= first - 1_000, 20, what="the tick to come near")
        assert scheduled_runs(r) == []  # the worker an hour ahead ran nothing early
        wait_until(lambda: redis_ms() >= first + 15_000 + 3_000, 40, what="two ticks to pass")
        runs = [f"t{first // 1000}", f"t{(first + 15_000) // 1000}"]
        assert scheduled_runs(r) == runs
        ats = [int(fields[b"at"]) for _, fields in r.xrange(K.jobs_events)]
        assert first <= ats[0] < first + 15_000 <= ats[1]
        for w in workers:
            assert w.stop() == 0, w.log()[-3000:]
        assert "clock is +3600" in workers[1].log() or "clock is +3599" in workers[1].log()
