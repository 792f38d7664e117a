"""A scheduled job fetches its pages again at each run, once, and its rows are updated.

Two real workers with RECRAWL_AFTER set, the db_writer on SQLite, and a site
whose pages say how many times each was fetched. The schedule runs every 10 s
of the clock the test steps (``JOBS_SCHEDULE_TEST_CLOCK``), so each run's
seeds carry a recrawl_after of 5 s (``jobs/schedules.py``). The seen-set
counts that on Redis' own clock, which no test can step (``seen.lua``): the
test waits on Redis' TIME until 5 s have passed since the first run's last
page, then steps the schedule's clock to the second tick.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.support.processes import K, db_writer, scrapy_command, wait_until, worker
from tests.support.site import TestSite

pytestmark = pytest.mark.slow

EVERY_10_S = "* * * * * */10"  # croniter's sixth field: seconds
RECRAWL_AFTER_S = 5.0  # half the timetable's interval
# Longer than the test: without the job's own, no page below the seed would
# come due again. The seen-set's unit is RECRAWL_AFTER / 16, 1 s: a page is
# due again 5 s after it was last enqueued, give or take a unit.
WORKER_RECRAWL_AFTER = "16"


class ChangingSite(TestSite):
    """Each page's title ends with how many times it was fetched: ``Page 7 (fetch 2)``."""

    __test__ = False

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fetches: Counter[str] = Counter()  # touched on the server's loop only

    def _route(self, site, method, target, host):
        status, ctype, body = super()._route(site, method, target, host)
        if status == 200 and b"</title>" in body:
            self.fetches[f"{site} {target}"] += 1
            mark = f" (fetch {self.fetches[f'{site} {target}']})</title>"
            body = body.replace(b"</title>", mark.encode(), 1)
        return status, ctype, body


def titles(db_path: Path) -> dict[str, list[str]]:
    """url -> the title of each row with that url in the db_writer's table."""
    if not db_path.exists():
        return {}
    found: dict[str, list[str]] = {}
    with sqlite3.connect(db_path) as db:
        try:
            for url, data in db.execute("SELECT url, data FROM items"):
                found.setdefault(url, []).append(json.loads(data)["title"])
        except sqlite3.OperationalError:  # not created yet
            return {}
    return found


def redis_ms(r) -> int:
    seconds, micros = r.time()
    return seconds * 1000 + micros // 1000


def test_each_scheduled_run_fetches_every_page_once_and_updates_its_row(
    redis_url, r, tmp_path, procs
):
    db_path = tmp_path / "items.db"
    clock = tmp_path / "clock"
    day = (datetime.now(UTC) + timedelta(days=1)).date()
    tick = int(datetime(day.year, day.month, day.day, 3, tzinfo=UTC).timestamp() * 1000)

    def set_clock(ms: int) -> None:
        new = clock.with_suffix(".new")
        new.write_text(str(ms))
        new.replace(clock)  # a worker never reads half a time

    # The tick's time from the start: `jobs schedule` records the last tick of
    # the real clock, so a worker that looked at 02:59:59 between the schedule
    # and a later step of the clock found the 02:59:50 tick missed and ran it
    # first (a CI run of 2026-11-27 saw ['t...790', 't...800', 't...810']).
    set_clock(tick + 500)
    # 0.25 s a page: each run lasts a few of the seen-set's units (1 s), with
    # every page linked from several others all along, so a run that found
    # its own pages due again would fetch some twice.
    site = ChangingSite(pages=20, seed=31, latency=0.25, offsite_links=False, dead_links=False)
    with site:
        pages = site.page_urls()
        writer = db_writer("dbw", redis_url, f"sqlite:///{db_path}", tmp_path)
        workers = [
            worker(
                f"w{i}",
                redis_url,
                tmp_path,
                f"RECRAWL_AFTER={WORKER_RECRAWL_AFTER}",
                f"JOBS_SCHEDULE_TEST_CLOCK={clock}",
                "JOBS_SCHEDULE_INTERVAL=0.2",
                "CONCURRENT_REQUESTS=4",
            )
            for i in range(2)
        ]
        procs += [writer, *workers]
        # As an operator schedules it, while the workers start.
        done = scrapy_command(
            redis_url, "jobs", "schedule", "again", "--cron", EVERY_10_S, site.url
        )
        assert done.returncode == 0, done.stderr
        wait_until(lambda: set(site.hits()) >= pages, 90, what="the first run")
        first_done = redis_ms(r)
        wait_until(lambda: set(titles(db_path)) == pages, 30, what="the first run's rows")
        record = json.loads(r.hget(K.jobs, "again"))
        assert record["tick"] == tick and record["recrawl_after"] == RECRAWL_AFTER_S

        # Every page the first run enqueued was enqueued before it was fetched:
        # 5 s (5 units) after the last fetch, all of them are due again.
        wait_until(
            lambda: redis_ms(r) >= first_done + RECRAWL_AFTER_S * 1000 + 200,
            20,
            what="the first run's pages to come due",
        )
        split = time.monotonic()
        set_clock(tick + 10_500)
        wait_until(lambda: all(site.hits()[u] >= 2 for u in pages), 60, what="the second run")
        wait_until(
            lambda: all(t[-1].endswith("(fetch 2)") for t in titles(db_path).values()),
            30,
            what="the rows to be updated",
        )
        # A page's links are written with its lease's acknowledgement: with no
        # request queued or leased, nothing more can be fetched.
        wait_until(
            lambda: int(r.get(K.requests_size) or 0) == 0 and r.zcard(K.leases) == 0,
            30,
            what="the frontier to drain",
        )
        log = [(at, path) for at, _, path, status in site.request_log() if status == 200]
        runs = [f[b"run"].decode() for _, f in r.xrange(K.jobs_events) if b"run" in f]
        # The job's counts are this run's: its pages, not both runs'.
        shown = scrapy_command(redis_url, "jobs", "show", "again", "--json")
        assert json.loads(shown.stdout)["pages"] == len(pages), shown.stdout
        assert all(w.alive() for w in workers)
        for proc in (*workers, writer):
            proc.signal(signal.SIGTERM)  # all at once: each takes a moment to finish
        for w in workers:
            assert w.wait(30) == 0, w.log()[-3000:]
        assert writer.wait(30) == 0, writer.log()[-3000:]

    assert runs == [f"t{tick // 1000}", f"t{tick // 1000 + 10}"]
    root = site.url.rstrip("/")
    first = Counter(root + path for at, path in log if at < split and path != "/robots.txt")
    second = Counter(root + path for at, path in log if at >= split and path != "/robots.txt")
    assert first == dict.fromkeys(pages, 1), "the first run: each page once"
    assert second == dict.fromkeys(pages, 1), "the second run: each page once again"
    # One row per page, holding what the second run fetched (newer wins).
    stored = titles(db_path)
    assert set(stored) == pages
    assert {u: t for u, t in stored.items() if len(t) != 1 or not t[0].endswith("(fetch 2)")} == {}
