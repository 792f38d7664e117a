"""Job webhooks on real workers: ``scrapy crawl`` processes with ``JobWebhooks`` among
their extensions, ``scrapy jobs`` as an operator runs it, and a receiver on a free
port that checks every signature (tests/support/webhooks.py).

Every state change of a job arrives signed, with its event id, once per URL, with two
workers running; a receiver that fails or hangs for a while gets the same events
later; an event a SIGKILLed worker held is delivered by the other; an event no URL
took within JOB_WEBHOOK_MAX_AGE is dropped with one log line and the counter; a
stalled job's event is written and sent once.
"""

from __future__ import annotations

import json
import signal
import socket
import time
from urllib.parse import urlsplit

import pytest

from spiders_project.config import load_settings
from spiders_project.jobs.webhook_delivery import GROUP
from spiders_project.read_model.job_progress import COUNTS
from tests.support.processes import (
    K,
    Proc,
    published_stats,
    scrapy_command,
    wait_until,
    worker,
)
from tests.support.site import TestSite
from tests.support.webhooks import FAIL, HANG, OK, Receiver

pytestmark = pytest.mark.slow

SECRET = "e2e-s3cret"
EXTENSION = "spiders_project.jobs.webhook_extension.JobWebhooks"
NUMBERS = {"at", "seeds", "since", *COUNTS}


def extensions() -> str:
    """EXTENSIONS with the webhooks' extension added to the project's own (a -s
    EXTENSIONS replaces the project's dict, it does not add to it), before the
    stats publisher (130): its loop stops before the worker's last publish."""
    return json.dumps({**load_settings().getdict("EXTENSIONS"), EXTENSION: 125})


def workers(redis_url, tmp_path, hooks: Receiver, *settings: str, n: int = 2) -> list[Proc]:
    return [
        worker(
            f"w{i}",
            redis_url,
            tmp_path,
            f"EXTENSIONS={extensions()}",
            f"JOB_WEBHOOK_URLS={hooks.urls()}",
            "STATS_PUBLISH_INTERVAL=1",
            "MAX_IDLE_TIME_BEFORE_CLOSE=0",
            *settings,
            env={"JOB_WEBHOOK_SECRET": SECRET},
        )
        for i in range(n)
    ]


def stream(r) -> dict[str, dict[str, str]]:
    return {
        i.decode(): {k.decode(): v.decode() for k, v in fields.items()}
        for i, fields in r.xrange(K.jobs_events)
    }


def as_sent(event_id: str, fields: dict[str, str]) -> dict:
    body = {k: int(v) if k in NUMBERS else v for k, v in fields.items()}
    return {"id": event_id, "spider": "distributed", **body}


def jobs(redis_url, *argv: str, timeout: float = 60) -> str:
    done = scrapy_command(redis_url, "jobs", *argv, timeout=timeout)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def shown(redis_url, job: str) -> dict:
    return json.loads(jobs(redis_url, "show", job, "--json"))


def started(r, procs: list[Proc]) -> None:
    wait_until(lambda: r.zcard(K.workers) == len(procs), 90, what="the workers to start")


def webhook_lines(procs: list[Proc]) -> list[str]:
    """What the workers said about webhooks, for a failing assertion's message."""
    return [line for p in procs for line in p.log().splitlines() if "webhook" in line.lower()]


def total(r, procs: list[Proc], stat: str) -> int:
    return sum(int(published_stats(r, p).get(stat, 0)) for p in procs)


def test_every_state_change_arrives_signed_once_per_url_with_two_workers(
    redis_url, r, tmp_path, procs
):
    # 40 pages a host, 0.3 s apart: job A runs for 12 s at least, so the pause
    # below (a scrapy command, seconds under load) comes while it runs (with 15
    # pages 0.2 s apart a CI run under load found A finished: "cannot pause it").
    with TestSite(pages=80, hosts=2, seed=40, offsite_links=False, dead_links=False) as site:
        with Receiver(SECRET, "a", "b") as hooks:
            crawlers = workers(
                redis_url, tmp_path, hooks, "DOWNLOAD_DELAY=0.3", "JOB_FINISH_GRACE=2"
            )
            procs += crawlers
            started(r, crawlers)
            jobs(redis_url, "submit", "A", site.urls[0])
            jobs(redis_url, "submit", "B", site.urls[1])
            wait_until(lambda: shown(redis_url, "A")["pages"] >= 3, 60, what="A to fetch")
            jobs(redis_url, "pause", "A")
            jobs(redis_url, "cancel", "B")
            jobs(redis_url, "resume", "A")
            jobs(redis_url, "wait", "A", "--timeout", "120", timeout=150)
            events = stream(r)
            wait_until(
                lambda: len(hooks.received("a")) == len(hooks.received("b")) == len(events),
                30,
                what="every event at both URLs",
            )
            time.sleep(3)  # nothing more comes: no event twice
            by_id = {i: as_sent(i, f) for i, f in events.items()}
            seen = (events, hooks.posts, webhook_lines(crawlers))
            for path in ("a", "b"):
                got = hooks.received(path)
                assert sorted(b["id"] for b in got) == sorted(by_id), seen
                assert all(body == by_id[body["id"]] for body in got), seen
            assert len(hooks.tried("a")) == len(hooks.tried("b")) == len(events), seen
            assert hooks.bad_signatures == 0
        for job, states in (
            ("A", ["running", "paused", "running", "finished"]),
            ("B", ["running", "cancelled"]),
        ):
            assert [e["state"] for e in events.values() if e["job"] == job] == states
        for w in crawlers:
            assert w.stop(60) == 0, w.log()[-3000:]
    assert total(r, crawlers, "webhooks/delivered") == len(events)
    assert total(r, crawlers, "webhooks/posted") == 2 * len(events)
    assert total(r, crawlers, "webhooks/failed") == 0
    assert int(r.xpending(K.jobs_events, GROUP)["pending"]) == 0
    for w in crawlers:
        assert "Traceback" not in w.log(), w.log()[-5000:]


def test_a_receiver_failing_then_hanging_gets_the_same_events_later(redis_url, r, tmp_path, procs):
    knobs = (
        "JOB_WEBHOOK_TIMEOUT=1",
        "JOB_WEBHOOK_RETRY_DELAY=1.5",
        "JOB_WEBHOOK_RETRY_MAX_DELAY=3",
    )
    with TestSite(pages=20, seed=41, offsite_links=False, dead_links=False) as site:
        with Receiver(SECRET, "a", "b") as hooks:
            crawlers = workers(redis_url, tmp_path, hooks, "DOWNLOAD_DELAY=0.2", *knobs)
            procs += crawlers
            started(r, crawlers)
            hooks.set("a", FAIL)
            jobs(redis_url, "submit", "J", site.url)
            wait_until(lambda: len(hooks.tried("a")) >= 2, 20, what="a retry")
            hooks.set("a", HANG)
            jobs(redis_url, "pause", "J")
            wait_until(lambda: len(hooks.tried("a", HANG)) >= 2, 20, what="tries that hang")
            hooks.set("a", OK)
            events = stream(r)
            assert len(events) == 2
            wait_until(lambda: len(hooks.received("a")) == 2, 20, what="a to get both events")
            time.sleep(2)
            by_id = {i: as_sent(i, f) for i, f in events.items()}
            # The same events, with the same ids, once each at each URL.
            assert sorted(b["id"] for b in hooks.received("a")) == sorted(by_id)
            assert sorted(b["id"] for b in hooks.received("b")) == sorted(by_id)
            assert all(body == by_id[body["id"]] for body in hooks.received("a"))
            # Tried again with backoff: never sooner than the first delay after a try.
            first = [p.at for p in hooks.tried("a") if p.body["id"] == min(by_id)]
            assert len(first) >= 3
            assert all(b - a >= 1.4 for a, b in zip(first, first[1:], strict=False)), first
        for w in crawlers:
            assert w.stop(60) == 0, w.log()[-3000:]
    assert total(r, crawlers, "webhooks/failed") == len(hooks.tried("a")) - 2
    assert total(r, crawlers, "webhooks/dropped") == 0
    logs = "".join(w.log() for w in crawlers)
    assert "failed (HTTP 500): its events are tried again with backoff" in logs
    assert "answers again" in logs


def test_an_event_a_killed_worker_held_is_delivered_by_the_other(redis_url, r, tmp_path, procs):
    knobs = ("JOB_WEBHOOK_TIMEOUT=4", "JOB_WEBHOOK_RETRY_DELAY=5", "JOB_FINISH_GRACE=600")
    with TestSite(pages=10, seed=42, offsite_links=False, dead_links=False) as site:
        with Receiver(SECRET, "a") as hooks:
            crawlers = workers(redis_url, tmp_path, hooks, *knobs)
            procs += crawlers
            started(r, crawlers)
            hooks.set("a", HANG)
            jobs(redis_url, "submit", "J", site.url)
            wait_until(lambda: len(hooks.tried("a")) == 1, 20, what="the first try")
            [entry] = r.xpending_range(K.jobs_events, GROUP, "-", "+", 10)
            holder = entry["consumer"].decode()
            [killed] = [w for w in crawlers if holder == f"{socket.gethostname()}:{w.pid}"]
            killed.signal(signal.SIGKILL)
            killed.wait(10)
            hooks.set("a", OK)
            wait_until(lambda: len(hooks.received("a")) == 1, 30, what="the other worker")
            time.sleep(2)
            [event] = stream(r)
            assert [b["id"] for b in hooks.received("a")] == [event]
            assert hooks.tried("a")[0].body["id"] == event
            [alive] = [w for w in crawlers if w is not killed]
            assert alive.alive()
            assert int(r.xpending(K.jobs_events, GROUP)["pending"]) == 0
            assert alive.stop(60) == 0, alive.log()[-3000:]
    assert total(r, [alive], "webhooks/delivered") == 1


def test_an_event_no_url_took_in_time_is_dropped_with_one_line_and_the_counter(
    redis_url, r, tmp_path, procs
):
    knobs = (
        "JOB_WEBHOOK_TIMEOUT=0.5",
        "JOB_WEBHOOK_RETRY_DELAY=1",
        "JOB_WEBHOOK_RETRY_MAX_DELAY=1",
        "JOB_WEBHOOK_MAX_AGE=4",
        "JOB_FINISH_GRACE=600",
    )
    with TestSite(pages=10, seed=43, offsite_links=False, dead_links=False) as site:
        with Receiver(SECRET, "a", "b") as hooks:
            crawlers = workers(redis_url, tmp_path, hooks, *knobs)
            procs += crawlers
            started(r, crawlers)
            hooks.set("a", FAIL)
            jobs(redis_url, "submit", "J", site.url)
            wait_until(lambda: total(r, crawlers, "webhooks/dropped") == 1, 30, what="the drop")
            time.sleep(3)
            [event] = stream(r)
            assert [b["id"] for b in hooks.received("b")] == [event]
            assert hooks.received("a") == []
            assert len(hooks.tried("a")) >= 3
        for w in crawlers:
            assert w.stop(60) == 0, w.log()[-3000:]
    assert total(r, crawlers, "webhooks/dropped") == 1
    # The exporter's counter: crawler_errors_total{kind="webhook_dropped"}.
    assert total(r, crawlers, "errors:webhook_dropped") == 1
    assert int(r.hget(K.stats_totals, "errors:webhook_dropped")) == 1
    lines = [
        line for w in crawlers for line in w.log().splitlines() if "Job webhooks: dropped" in line
    ]
    assert len(lines) == 1, lines
    assert f"dropped event {event}: J running: not delivered to http://127.0.0.1:" in lines[0]
    assert int(r.xpending(K.jobs_events, GROUP)["pending"]) == 0


def test_a_stalled_job_gets_one_event_and_one_webhook(redis_url, r, tmp_path, procs):
    with TestSite(pages=20, seed=44, offsite_links=False, dead_links=False) as site:
        # One page an hour on the site: the job has work queued and fetches nothing.
        slow = json.dumps({urlsplit(site.url).netloc: 3600})
        with Receiver(SECRET, "a") as hooks:
            crawlers = workers(
                redis_url,
                tmp_path,
                hooks,
                f"HOST_DOWNLOAD_DELAYS={slow}",
                "ROBOTSTXT_OBEY=False",
                "JOB_STALL_AFTER=3",
                "JOB_FINISH_GRACE=3",
            )
            procs += crawlers
            started(r, crawlers)
            jobs(redis_url, "submit", "J", site.url)

            def stalled() -> list[str]:
                return [i for i, e in stream(r).items() if e["state"] == "stalled"]

            wait_until(lambda: stalled(), 30, what="the stalled event")
            time.sleep(8)  # the looks go on, every second: still one event
            [event] = stalled()
            wait_until(lambda: len(hooks.received("a")) == 2, 10, what="both webhooks")
            body = hooks.received("a")[1]
            assert body["id"] == event and body["state"] == "stalled"
            assert body["via"] == "nothing fetched" and body["queued"] >= 1
            assert body["at"] - body["since"] >= 3000
            assert shown(redis_url, "J")["state"] == "running"
        for w in crawlers:
            assert w.stop(60) == 0, w.log()[-3000:]
    assert [e["state"] for e in stream(r).values()] == ["running", "stalled"]
    assert total(r, crawlers, "jobs/stalled") == 1
