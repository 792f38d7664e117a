"""A job ends even when every worker has exited before its grace ran out.

Workers that close when idle (``MAX_IDLE_TIME_BEFORE_CLOSE`` shorter than
``JOB_FINISH_GRACE``) leave no one to find their last job finished; the
monitor runs the same finish rule (``jobs/finish.py``) with the operator's
connection (``CONSOLE_REDIS_URL``). Every process logs in as its own Redis
user (``redis_access/acl.py``), so a write the monitor's own connection tried
would be refused and found in the ACL log. Two monitors look, and a third
without ``CONSOLE_REDIS_URL`` only reads: the job ends once, with one event.
"""

from __future__ import annotations

import time

import pytest

from tests.support.acl_users import AclRedis, acl_text
from tests.support.monitoring import Exporter
from tests.support.processes import PYTHON, K, Proc, worker
from tests.support.site import TestSite

pytestmark = pytest.mark.slow

GRACE = 8
PAGES = 50


def test_the_monitor_finishes_a_job_whose_workers_all_closed_when_idle(tmp_path, procs):
    acl = AclRedis(tmp_path / "redis", acl_text("distributed"))
    admin = acl.admin
    operator = acl.url("operator")
    monitors: list[Exporter] = []
    try:
        with TestSite(
            pages=PAGES, seed=40, latency=0.01, offsite_links=False, dead_links=False
        ) as site:
            grace = f"JOB_FINISH_GRACE={GRACE}"
            for name, extra in (
                ("m1", [f"CONSOLE_REDIS_URL={operator}"]),
                ("m2", [f"CONSOLE_REDIS_URL={operator}"]),
                ("m3", []),
            ):
                monitors.append(Exporter(acl.url("monitor"), tmp_path, grace, *extra, name=name))
            # The job first: a worker that closes when idle must find its seed.
            submit = [PYTHON, "-m", "scrapy", "jobs", "submit", "J", site.url]
            done = Proc("submit", submit, {"REDIS_URL": operator}, tmp_path / "submit.log")
            assert done.wait(60) == 0, done.log()
            w = worker("w", acl.url("worker"), tmp_path, grace, "MAX_IDLE_TIME_BEFORE_CLOSE=2")
            procs.append(w)
            wait_argv = [PYTHON, "-m", "scrapy", "jobs", "wait", "J", "--timeout", "90"]
            waiting = Proc("wait", wait_argv, {"REDIS_URL": operator}, tmp_path / "wait.log")
            procs.append(waiting)
            # The worker crawls the site and closes, idle, long before the grace ends.
            assert w.wait(120) == 0, w.log()[-3000:]
            last_page = max(t for t, _, path, _ in site.request_log() if path != "/robots.txt")
            assert waiting.wait(GRACE + 30) == 0, waiting.log()
            ended = time.monotonic()
            pages = {path for _, _, path, _ in site.request_log() if path != "/robots.txt"}
        assert len(pages) == PAGES
        assert ended - last_page <= GRACE + 10, (ended - last_page, waiting.log())
        assert "Job J finished" in waiting.log()
        states = [
            fields[b"state"] for _, fields in admin.xrange(K.jobs_events) if fields[b"job"] == b"J"
        ]
        assert states == [b"running", b"finished"]
        # A monitor decided it: the worker had gone before the grace ended.
        assert "Job J finished" not in w.log()
        assert sum("Job J finished" in m.log() for m in monitors) == 1
        assert "finishes no job" in monitors[2].log()
        # No process was refused a command or a key: the monitors' own user wrote nothing.
        assert acl.denials() == []
    finally:
        for monitor in monitors:
            monitor.close()
        acl.close()
