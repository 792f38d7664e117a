"""Per-job counts on a real crawl: two jobs, two workers, the local test site.

Each job's pages must equal what the site served for that job's seeds, with
nothing left queued, in flight or backing off, and ``scrapy jobs show --json``
must print those numbers (issue 27, item 5).
"""

from __future__ import annotations

import json

import pytest

from spiders_project.read_model.job_progress import FIELDS
from tests.support.processes import K, scrapy_command, wait_until, worker
from tests.support.site import TestSite

pytestmark = pytest.mark.slow


def served(site: TestSite) -> int:
    return sum(1 for _, _, path, _ in site.request_log() if path != "/robots.txt")


def test_two_jobs_count_exactly_the_pages_the_site_served_for_each(redis_url, r, tmp_path, procs):
    with (
        TestSite(pages=60, seed=31, latency=0.01, offsite_links=False, dead_links=False) as one,
        TestSite(pages=40, seed=32, latency=0.01, offsite_links=False, dead_links=False) as two,
    ):
        workers = [
            worker(
                f"w{i}",
                redis_url,
                tmp_path,
                # Up until stopped, whatever a command's start takes under load.
                "MAX_IDLE_TIME_BEFORE_CLOSE=0",
                "JOB_FINISH_GRACE=2",
                "CONCURRENT_REQUESTS=4",
                "STATS_PUBLISH_INTERVAL=0.5",
            )
            for i in range(2)
        ]
        procs += workers
        wait_until(lambda: r.zcard(K.workers) == 2, 90, what="both workers to start")
        for job, site in (("alpha", one), ("beta", two)):
            done = scrapy_command(redis_url, "jobs", "submit", job, site.url)
            assert done.returncode == 0, done.stderr
        for job in ("alpha", "beta"):
            waited = scrapy_command(redis_url, "jobs", "wait", job, "--timeout", "120", timeout=140)
            assert waited.returncode == 0, waited.stdout + waited.stderr
        for w in workers:
            assert w.stop(60) == 0, w.log()[-3000:]
        expected = {"alpha": served(one), "beta": served(two)}
    assert expected["alpha"] > 20 and expected["beta"] > 10
    listed = scrapy_command(redis_url, "jobs", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    jobs = {j["id"]: j for j in map(json.loads, listed.stdout.splitlines())}
    assert set(jobs) == {"alpha", "beta"}
    for job, pages in expected.items():
        shown = scrapy_command(redis_url, "jobs", "show", job, "--json")
        assert shown.returncode == 0, shown.stderr
        out = json.loads(shown.stdout)
        assert tuple(out) == FIELDS
        assert out["pages"] == pages and jobs[job]["pages"] == pages
        assert out["queued"] == out["in_flight"] == out["backing_off"] == 0
        assert out["state"] == "finished" and out["started_at"] and out["finished_at"]
        assert out["eta_s"] is None or out["queued"] == 0
    # Every item scraped is counted for its job, once.
    items = int(r.hget(K.stats_totals, "items") or 0)
    assert items > 0 and jobs["alpha"]["items"] + jobs["beta"]["items"] == items
    text = scrapy_command(redis_url, "jobs", "show", "alpha")
    assert f"pages        {expected['alpha']}" in text.stdout
