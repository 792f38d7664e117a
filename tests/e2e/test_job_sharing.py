"""Jobs on one host share it, and a job's in_flight is its downloads, on a real crawl.

One ``scrapy crawl distributed`` worker and a local site of endless trees
(``tests/support/tree_site.py``): each job crawls its own tree on the same
host, so they share one politeness group and one cluster-wide cap, and the
site's request log says whose each fetch was, and when.
"""

from __future__ import annotations

import json
import time

import pytest

from spiders_project.read_model.job_progress import read_jobs
from tests.integration.test_frontier_scripts import Scripts
from tests.support.processes import K, scrapy_command, wait_until, worker
from tests.support.tree_site import TreeSite

pytestmark = pytest.mark.slow

WINDOW = 30.0
CAP = 4


@pytest.mark.parametrize("first", ["A", "B"])
def test_two_jobs_on_one_host_share_it_whichever_was_submitted_first(
    redis_url, r, tmp_path, procs, first
):
    """The second job comes 1.5 s after the first, as the operator's did (it had 5
    pages against 500 after 30 s): each gets at least 40% of the host's fetches
    over every 30 s window from then on."""
    second = "B" if first == "A" else "A"
    with TreeSite(latency=0.1) as site:
        w = worker(
            "w",
            redis_url,
            tmp_path,
            "MAX_IDLE_TIME_BEFORE_CLOSE=0",
            f"CONCURRENT_REQUESTS_PER_DOMAIN={CAP}",
            "CONCURRENT_REQUESTS=16",
        )
        procs.append(w)
        wait_until(lambda: r.zcard(K.workers) == 1, 90, what="the worker to start")
        for job in (first, second):
            done = scrapy_command(redis_url, "jobs", "submit", job, site.tree(job.lower()))
            assert done.returncode == 0, done.stderr
            if job == first:
                wait_until(lambda: site.fetched("a") + site.fetched("b") > 0, 30, what="a fetch")
                time.sleep(1.5)
        t_second = time.monotonic()
        time.sleep(WINDOW + 3)
        for job in (first, second):
            assert scrapy_command(redis_url, "jobs", "cancel", job).returncode == 0
    assert w.stop(60) == 0, w.log()[-3000:]
    for start in (t_second + k for k in range(4)):
        a = site.fetched("a", start, start + WINDOW)
        b = site.fetched("b", start, start + WINDOW)
        assert a + b > 200, (a, b)  # the host was busy all along
        assert min(a, b) >= 0.4 * (a + b), (start - t_second, a, b)


def test_in_flight_is_at_most_the_hosts_cap_and_leased_shows_the_rest(
    redis_url, r, tmp_path, procs
):
    """Slow pages: the worker holds the host's 4 slots and spare leases beyond
    them; the job's in_flight never passes the cap (what ``scrapy frontier host``
    shows), and its other leases are ``leased``."""
    with TreeSite(latency=0.5) as site:
        w = worker(
            "w",
            redis_url,
            tmp_path,
            "MAX_IDLE_TIME_BEFORE_CLOSE=0",
            f"CONCURRENT_REQUESTS_PER_DOMAIN={CAP}",
            "CONCURRENT_REQUESTS=16",
        )
        procs.append(w)
        wait_until(lambda: r.zcard(K.workers) == 1, 90, what="the worker to start")
        assert scrapy_command(redis_url, "jobs", "submit", "S", site.tree("s")).returncode == 0
        calls = Scripts(r).calls
        samples: list[tuple[int, int, int]] = []
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            found = [p for p in read_jobs(calls, K) if p.id == "S"]
            if found:
                host = int(r.hget(K.in_flight, site.url.split("/")[2]) or 0)
                samples.append((found[0].in_flight, found[0].leased, host))
            time.sleep(0.05)
        listed = scrapy_command(redis_url, "jobs", "list", "--json")
        assert listed.returncode == 0, listed.stderr
        (shown,) = [j for j in map(json.loads, listed.stdout.splitlines()) if j["id"] == "S"]
        assert scrapy_command(redis_url, "jobs", "cancel", "S").returncode == 0
    assert w.stop(60) == 0, w.log()[-3000:]
    assert shown["in_flight"] <= CAP and "leased" in shown
    assert max(f for f, _, _ in samples) == CAP  # the host's slots were all taken
    assert all(f <= CAP and h <= CAP for f, _, h in samples), samples
    # The leases beyond the slots (spares, pages awaiting their ack): counted apart.
    assert max(f + leased for f, leased, _ in samples) > CAP, samples
