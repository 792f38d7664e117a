"""Pause, resume, cancel and finish on real workers (issue 27, items 2 to 6).

Two jobs on overlapping hosts: A crawls site 0 and site 1, B crawls site 2
and sends 40 requests of its own to site 1 (``/page/<n>?b=<n>``, which the
site answers 404: pages without links, so site 1's graph stays A's and the
site's request log says whose each request was). Two ``scrapy crawl``
workers, the db_writer into SQLite, and ``scrapy jobs`` as an operator runs
it. Every host is spaced 0.2 s by the cluster, so the crawl takes long enough
to pause and cancel in the middle of it (site 2 0.4 s).
"""

from __future__ import annotations

import json
import signal
import sqlite3
import time
from urllib.parse import urljoin, urlsplit

import pytest
import redis

from spiders_project.jobs.control import change_state
from spiders_project.keys.jobs import job_held, job_look
from tests.integration.test_frontier_scripts import Scripts
from tests.support.processes import (
    K,
    Proc,
    db_writer,
    items_drained,
    published_stats,
    scrapy_command,
    stat,
    wait_until,
    worker,
)
from tests.support.site import TestSite
from tests.support.tree_site import TreeSite

pytestmark = pytest.mark.slow

PAGES = 50
B_ON_SHARED = 40


def job_of(host: str, target: str, netlocs: list[str]) -> str | None:
    """Whose request the site saw: A's (site 0, site 1's pages), B's (site 2, site 1's ?b=)."""
    if target == "/robots.txt":
        return None
    site = netlocs.index(host)
    if site == 1:
        return "B" if "?b=" in target else "A"
    return "A" if site == 0 else "B"


def discovered(site: TestSite, index: int, fetched: set[str]) -> set[str]:
    """Every page URL of site ``index`` its root or a fetched page links to."""
    root = site.urls[index]
    found = {root}
    for path in fetched:
        n = 0 if path == "/" else int(path.rsplit("/", 1)[1])
        page_url = urljoin(root, path)
        for href, _ in site._sites[index][n].hrefs:
            url = urljoin(page_url, href.format(netloc=urlsplit(root).netloc, trap=""))
            found.add(url.split("#", 1)[0])
    return found


def stored(db_path) -> list[str]:
    with sqlite3.connect(db_path) as db:
        return [row[0] for row in db.execute("SELECT url FROM items")]


def sent_after(r: redis.Redis, workers: list[Proc], wall: float) -> dict[str, int]:
    """Each worker's published request count, from its first publish after ``wall``
    (Unix time): what it had sent by some time after ``wall``."""
    sent: dict[str, int] = {}

    def read() -> bool:
        for w in workers:
            stats = published_stats(r, w)
            if w.name not in sent and float(stats.get("_last_seen", 0)) > wall:
                sent[w.name] = int(stats.get("downloader/request_count", 0))
        return len(sent) == len(workers)

    wait_until(read, 30, what="each worker to publish its stats")
    return sent


def events(r, job: str) -> list[dict[str, str]]:
    out = []
    for _, fields in r.xrange(K.jobs_events):
        event = {k.decode(): v.decode() for k, v in fields.items()}
        if event["job"] == job:
            out.append(event)
    return out


def test_pause_a_cancel_b_on_shared_hosts_and_a_finishes(redis_url, r, tmp_path, procs):
    db_path = tmp_path / "items.db"
    with TestSite(
        pages=PAGES,
        seed=27,
        hosts=3,
        latency=0.02,
        offsite_links=False,
        dead_links=False,
    ) as site:
        netlocs = [urlsplit(u).netloc for u in site.urls]
        # B's own site at half A's pace, so it is half crawled when B is cancelled.
        slower = json.dumps({netlocs[2]: 0.4})
        workers = [
            worker(
                f"w{i}",
                redis_url,
                tmp_path,
                "DOWNLOAD_DELAY=0.2",
                f"HOST_DOWNLOAD_DELAYS={slower}",
                "CONCURRENT_REQUESTS=4",
                "JOB_FINISH_GRACE=3",
                "MAX_IDLE_TIME_BEFORE_CLOSE=0",
                "STATS_PUBLISH_INTERVAL=0.5",
            )
            for i in range(2)
        ]
        writer = db_writer("dbw", redis_url, f"sqlite:///{db_path}", tmp_path)
        procs += [*workers, writer]
        wait_until(lambda: r.zcard(K.workers) == 2, 90, what="both workers to start")
        shared_b = [f"{site.urls[1]}page/{n}?b={n}" for n in range(1, B_ON_SHARED + 1)]
        for job, urls in (("A", site.urls[:2]), ("B", [site.urls[2], *shared_b])):
            done = scrapy_command(redis_url, "jobs", "submit", job, *urls)
            assert done.returncode == 0, done.stderr

        def served(job: str, after: float = 0.0) -> list[tuple[float, str, str]]:
            return [
                (t, host, target)
                for t, host, target, _ in site.request_log()
                if t > after and job_of(host, target, netlocs) == job
            ]

        wait_until(lambda: len(served("A")) >= 15, 60, what="A to fetch 15 pages")
        paused = scrapy_command(redis_url, "jobs", "pause", "A")
        assert paused.returncode == 0, paused.stderr
        t_pause, paused_wall = time.monotonic(), time.time()
        # Both workers went on downloading after the 2 s a pause is given (their
        # published request counts grew), A's requests they leased were set
        # aside, and the window of the rate below (to 5 s after the pause) is over.
        sent = sent_after(r, workers, paused_wall + 2)
        wait_until(
            lambda: (
                time.monotonic() > t_pause + 5
                and r.zcard(job_held(K)) > 0
                and all(stat(r, w, "downloader/request_count") > sent[w.name] for w in workers)
            ),
            30,
            what="both workers to download after the pause, A's requests set aside",
        )
        # No request of A started 2 s after the pause; B went on, on the shared host too.
        assert served("A", t_pause + 2) == []
        b_meanwhile = [x for x in served("B", t_pause + 2) if x[0] <= t_pause + 5]
        assert len(b_meanwhile) >= 8
        # "At full speed": the shared host serves B as fast during A's pause as it
        # served A and B together before it (A's requests set aside take no turn).
        shared = [t for t, host, _, _ in site.request_log() if host == netlocs[1]]
        before = [t for t in shared if t <= t_pause]
        rate_before = (len(before) - 1) / (before[-1] - before[0])
        rate_during = sum(1 for t in shared if t_pause + 2 < t <= t_pause + 5) / 3
        assert rate_during >= 0.7 * rate_before, (rate_during, rate_before)
        shown = json.loads(scrapy_command(redis_url, "jobs", "show", "A", "--json").stdout)
        assert shown["state"] == "paused" and shown["queued"] > 0
        # Cancel B while its site is half crawled.
        before = json.loads(scrapy_command(redis_url, "jobs", "show", "B", "--json").stdout)
        assert before["queued"] >= 10, before
        cancelled = scrapy_command(redis_url, "jobs", "cancel", "B", "--json")
        assert cancelled.returncode == 0, cancelled.stderr
        report = json.loads(cancelled.stdout)
        assert report["purged"] > 0, (report, before)
        t_cancel = time.monotonic()
        resumed = scrapy_command(redis_url, "jobs", "resume", "A")
        assert resumed.returncode == 0, resumed.stderr
        waited = scrapy_command(redis_url, "jobs", "wait", "A", "--timeout", "150", timeout=170)
        assert waited.returncode == 0, waited.stdout + waited.stderr
        wait_until(lambda: items_drained(r), 60, what="the item buffer to drain")
        log = site.request_log()
    assert writer.stop(30) == 0, writer.log()[-3000:]
    for w in workers:
        assert w.stop(60) == 0, w.log()[-3000:]
    assert scrapy_command(redis_url, "jobs", "wait", "B").returncode == 3

    # A: every page of both its sites fetched once and stored once, after the resume.
    a_paths = [(host, target) for _, host, target, _ in log if job_of(host, target, netlocs) == "A"]
    assert len(a_paths) == len(set(a_paths)) == 2 * PAGES
    a_urls = {u for u in site.page_urls() if urlsplit(u).netloc in netlocs[:2]}
    rows = stored(db_path)
    assert len(rows) == len(set(rows))
    a_rows = [u for u in rows if urlsplit(u).netloc in netlocs[:2]]
    assert set(a_rows) == a_urls
    # The finished event carries A's counts, equal to what the site and the database saw.
    finished = [e for e in events(r, "A") if e["state"] == "finished"]
    assert len(finished) == 1
    assert int(finished[0]["pages"]) == 2 * PAGES
    assert int(finished[0]["items"]) == len(a_rows)
    assert int(finished[0]["queued"]) == int(finished[0]["in_flight"]) == 0
    assert [e["state"] for e in events(r, "A")] == ["running", "paused", "running", "finished"]

    # B: nothing started after the cancel took effect; every URL it discovered is
    # fetched, purged or refused, once.
    b_log = [
        (t, host, target) for t, host, target, _ in log if job_of(host, target, netlocs) == "B"
    ]
    assert not [x for x in b_log if x[0] > t_cancel + 2]
    b = json.loads(scrapy_command(redis_url, "jobs", "show", "B", "--json").stdout)
    assert b["state"] == "cancelled" and b["finished_at"]
    assert b["queued"] == b["in_flight"] == b["backing_off"] == 0
    assert b["pages"] == len(b_log)
    # Its pages in flight at the cancel finished: every item of B is stored.
    assert b["items"] == len([u for u in rows if urlsplit(u).netloc == netlocs[2]])
    fetched_b = {target for _, host, target in b_log if host == netlocs[2]}
    found = discovered(site, 2, fetched_b) | set(shared_b)
    assert b["pages"] + b["purged"] + b["refused"] + b["dead_letters"] == len(found)
    assert [e["state"] for e in events(r, "B")] == ["running", "cancelled"]


def test_a_pause_holds_across_a_killed_worker_and_a_redis_restart(start_redis, tmp_path, procs):
    executor, url = start_redis("--appendonly", "yes", "--appendfsync", "always")
    r = redis.Redis.from_url(url)
    settings = (
        "DOWNLOAD_DELAY=0.2",
        "FRONTIER_LEASE_TIMEOUT=3",
        "JOB_FINISH_GRACE=3",
        "MAX_IDLE_TIME_BEFORE_CLOSE=0",
    )
    with TestSite(pages=40, seed=28, latency=0.02, offsite_links=False, dead_links=False) as site:
        first = worker("w1", url, tmp_path, *settings)
        procs.append(first)
        assert scrapy_command(url, "jobs", "submit", "P", site.url).returncode == 0

        def pages(after: float = 0.0) -> list[str]:
            return [p for t, _, p, _ in site.request_log() if t > after and p != "/robots.txt"]

        wait_until(lambda: len(pages()) >= 10, 90, what="10 pages of P")
        assert scrapy_command(url, "jobs", "pause", "P").returncode == 0
        t_pause = time.monotonic()
        # The worker dies holding leases; Redis restarts from its AOF; a new worker comes.
        first.signal(signal.SIGKILL)
        first.wait(10)
        executor.stop()
        time.sleep(1)
        executor.start()
        second = worker("w2", url, tmp_path, *settings)
        procs.append(second)
        # Past the killed worker's lease timeout: its leases came back, and the new
        # worker's leases took every queued request of P and set it aside.
        wait_until(
            lambda: (
                "_last_seen" in published_stats(r, second)
                and r.zcard(K.leases) == 0
                and int(r.get(K.requests_size) or 0) == 0
                and r.zcard(job_held(K)) > 0
            ),
            90,
            what="the second worker to set the paused job's requests aside",
        )
        assert pages(t_pause + 2) == []
        shown = json.loads(scrapy_command(url, "jobs", "show", "P", "--json").stdout)
        assert shown["state"] == "paused" and shown["queued"] > 0
        # A resume cut short: the job runs, its requests are still set aside.
        # The worker's next look puts them back (the other test resumes whole).
        calls = Scripts(r).calls
        change_state(calls, K, "P", "running", why="resume", events_max=100)
        assert r.zcard(job_held(K)) > 0
        waited = scrapy_command(url, "jobs", "wait", "P", "--timeout", "120", timeout=140)
        assert waited.returncode == 0, waited.stdout + waited.stderr
        fetched = set(pages())
    assert second.stop(60) == 0, second.log()[-3000:]
    assert {urlsplit(u).path for u in site.page_urls()} == fetched
    assert "requests of jobs no longer paused" in second.log()
    r.close()


def test_a_job_seeded_raw_is_paused_resumed_and_cancelled_as_soon_as_it_is_listed(
    redis_url, r, tmp_path, procs
):
    """No worker's look has written the job's record yet (this test holds the
    looks' turn, ``jobs:look``, as a look that never ends would): ``scrapy jobs
    list`` shows the job running from its first count, and every change of
    ``scrapy jobs`` works on it there and then, and takes effect."""
    with TreeSite(latency=0.05) as site:
        w = worker(
            "w",
            redis_url,
            tmp_path,
            "MAX_IDLE_TIME_BEFORE_CLOSE=0",
            "CONCURRENT_REQUESTS_PER_DOMAIN=2",
            "STATS_PUBLISH_INTERVAL=0.5",
        )
        procs.append(w)
        wait_until(lambda: r.zcard(K.workers) == 1, 90, what="the worker to start")
        r.set(job_look(K), "the test", px=600_000)
        for job, tree in (("R", "r"), ("W", "w")):
            r.lpush(K.start_urls, json.dumps({"url": site.tree(tree), "job": job}))

        def listed() -> dict[str, dict]:
            done = scrapy_command(redis_url, "jobs", "list", "--json")
            assert done.returncode == 0, done.stderr
            return {j["id"]: j for j in map(json.loads, done.stdout.splitlines())}

        wait_until(lambda: {"R", "W"} <= set(listed()), 60, what="both raw jobs to be listed")
        jobs = listed()
        assert jobs["R"]["state"] == jobs["W"]["state"] == "running"
        assert r.hget(K.jobs, "R") is None and r.hget(K.jobs, "W") is None  # no record yet
        # Waiting for one is waiting for a running job, not "no such job".
        waited = scrapy_command(redis_url, "jobs", "wait", "W", "--timeout", "1")
        assert waited.returncode == 4, waited.stdout + waited.stderr

        paused = scrapy_command(redis_url, "jobs", "pause", "R")
        assert paused.returncode == 0, paused.stderr
        t_pause = time.monotonic()
        cancelled = scrapy_command(redis_url, "jobs", "cancel", "W", "--json")
        assert cancelled.returncode == 0, cancelled.stderr
        t_cancel = time.monotonic()
        assert json.loads(r.hget(K.jobs, "R"))["state"] == "paused"
        assert json.loads(r.hget(K.jobs, "W"))["state"] == "cancelled"
        # Paused and cancelled from 2 s on: neither fetches while W keeps its end.
        time.sleep(4)
        assert site.fetched("r", t_pause + 2) == 0
        assert site.fetched("w", t_cancel + 2) == 0
        assert scrapy_command(redis_url, "jobs", "resume", "R").returncode == 0
        wait_until(lambda: site.fetched("r", time.monotonic() - 1) > 0, 30, what="R to fetch")
        assert scrapy_command(redis_url, "jobs", "cancel", "R").returncode == 0
        assert scrapy_command(redis_url, "jobs", "wait", "R", "--timeout", "5").returncode == 3
        assert scrapy_command(redis_url, "jobs", "wait", "W", "--timeout", "5").returncode == 3
    assert w.stop(60) == 0, w.log()[-3000:]
    assert [e["state"] for e in events(r, "R")] == ["paused", "running", "cancelled"]
    assert [e["state"] for e in events(r, "W")] == ["cancelled"]
    assert json.loads(r.hget(K.jobs, "R"))["via"] == "seeded"
