"""Operating the crawler: the exporter during a real crawl, and the supervisord deployment.

Real workers (``scrapy crawl distributed``), a real db_writer, the exporter
(``python -m monitor``), and supervisord started from
``deploy/supervisor/crawler.conf`` through the demo's config renderer.
"""

from __future__ import annotations

import collections
import json
import os
import re
import signal
import socket
import subprocess
import time
from datetime import datetime

import pytest
import redis

from spiders_project.demo.supervisor import render_config
from spiders_project.keys import RENDER
from spiders_project.keys.db_writers import writers
from tests.support.monitoring import Exporter, Metrics, scrape_url
from tests.support.processes import (
    PYTHON,
    ROOT,
    K,
    db_writer,
    items_in_hand,
    stored_urls,
    wait_until,
    worker,
)
from tests.support.services import free_port
from tests.support.site import TestSite
from tests.support.supervisor import Supervisord

SPIDER = {"spider": "distributed"}
pytestmark = pytest.mark.slow
# Publish every second, so the test sees heartbeats come and go in seconds.
FAST_STATS = ("STATS_PUBLISH_INTERVAL=1", "STATS_HEARTBEAT_TTL=3")


def redis_queues(r: redis.Redis) -> dict[str, int]:
    """Every queue the exporter reports, read straight from Redis."""
    pipe = r.pipeline(transaction=True)
    pipe.llen(K.start_urls).get(K.requests_size).zcard(K.leases).llen(K.items)
    pipe.hvals(writers(K)).llen(K.dead)
    pipe.llen(K.start_urls_rejected).llen(K.requests_rejected)
    pipe.llen(K.items_rejected).llen(K.dead_rejected).llen(K.requests_unserializable)
    render = K.in_lane(RENDER)
    pipe.get(render.requests_size).zcard(render.leases)
    replies = [sum(map(int, x)) if isinstance(x, list) else int(x or 0) for x in pipe.execute()]
    names = ("start_urls", "requests", "leases", "items", "items_processing", "dead")
    queues = {
        **dict(zip(names, replies[:6], strict=True)),
        "render": replies[11],
        "rejected": sum(replies[6:10]),
        "unserializable": replies[10],
    }
    queues["requests"] += replies[11]  # the render queue's are requests too
    queues["leases"] += replies[12]
    return queues


def exported_queues(m: Metrics) -> dict[str, int]:
    return {
        dict(labels)["queue"]: int(value)
        for labels, value in m.series("crawler_queue_length", **SPIDER).items()
    }


def test_exporter_during_a_two_worker_crawl(redis_url, r, tmp_path, procs):
    db_path = tmp_path / "items.db"
    refused = f"http://127.0.0.1:{free_port()}/"  # nothing listens: 3 attempts, a dead letter
    exporter = Exporter(redis_url, tmp_path)
    procs.append(exporter.proc)
    with TestSite(pages=400, seed=21, latency=0.1, flaky_every=25) as site:
        r.lpush(K.start_urls, site.url, refused, "not a url")
        settings = (*FAST_STATS, "MAX_IDLE_TIME_BEFORE_CLOSE=3", "CONCURRENT_REQUESTS=4")
        workers = [worker(f"w{i}", redis_url, tmp_path, *settings) for i in (1, 2)]
        procs += workers
        pids = {f"{socket.gethostname()}:{w.pid}" for w in workers}

        # During the crawl: both workers alive, under their host:pid.
        wait_until(
            lambda: exporter.scrape().get("crawler_workers_alive", **SPIDER) == 2,
            60,
            what="both workers to be alive",
        )
        m = exporter.scrape()
        assert r.llen(K.items) < len(site.page_urls()), "the crawl ended too soon to watch it"
        up = m.series("crawler_worker_up", **SPIDER)
        assert {dict(labels)["worker"] for labels in up} == pids
        assert set(up.values()) == {1}
        # Values the crawl moves only upwards lie between a Redis read before and one after.
        before = (int(r.get(K.seen) or 0), int(r.hget(K.stats_totals, "pages") or 0))
        m = exporter.scrape()
        after = (int(r.get(K.seen) or 0), int(r.hget(K.stats_totals, "pages") or 0))
        assert before[0] <= m.value("crawler_dupefilter_size", **SPIDER) <= after[0]
        assert before[1] <= m.value("crawler_spider_pages_total", **SPIDER) <= after[1]

        for w in workers:
            assert w.wait(120) == 0, w.log()[-3000:]
        # Both signed off: none alive, none reported lost, at once (not after a TTL).
        m = exporter.scrape()
        assert m.value("crawler_workers_alive", **SPIDER) == 0
        assert m.series("crawler_worker_up") == {}

        # Nothing moves now: every queue is exactly what Redis holds.
        m = exporter.scrape()
        queues = redis_queues(r)
        assert exported_queues(m) == queues
        assert queues["items"] == len(site.page_urls()) and queues["dead"] == 1
        assert queues["rejected"] == 1  # "not a url"
        assert m.value("crawler_dupefilter_size", **SPIDER) == int(r.get(K.seen) or 0)
        seconds, micros = r.time()
        oldest = json.loads(r.lindex(K.items, 0))["at"]
        lag = seconds + micros / 1e6 - datetime.fromisoformat(oldest).timestamp()
        assert abs(m.value("crawler_db_writer_lag_seconds", **SPIDER) - lag) < 2

        status = subprocess.run(
            [PYTHON, "-m", "scrapy", "crawlstatus", "--once"],
            cwd=ROOT,
            env={**os.environ, "REDIS_URL": redis_url},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert f"| items {queues['items']:,} |" in status.stdout, status.stdout + status.stderr
        assert "workers     0 alive, 0 lost" in status.stdout
        assert "ETA         nothing queued" in status.stdout

        writer = db_writer("dbw", redis_url, f"sqlite:///{db_path}", tmp_path)
        procs.append(writer)
        wait_until(
            lambda: r.llen(K.items) == 0 and items_in_hand(r) == 0,
            60,
            what="the item buffer to drain",
        )
        assert writer.stop(30) == 0, writer.log()[-3000:]
        requests = site.request_log()

    urls = stored_urls(db_path)
    assert sorted(urls) == sorted(site.page_urls())
    m = exporter.scrape()
    assert exported_queues(m) == redis_queues(r)
    assert m.value("crawler_queue_length", queue="items", **SPIDER) == 0
    assert m.value("crawler_db_writer_lag_seconds", **SPIDER) == 0
    # Counters against the database and against what the site served.
    assert m.value("crawler_db_writer_items_written_total", **SPIDER) == len(urls)
    assert m.value("crawler_spider_items_total", **SPIDER) == len(urls)
    statuses = collections.Counter(str(status) for _, _, _, status in requests)
    assert statuses["503"] > 0 and statuses["404"] > 0
    exported = {
        dict(labels)["status"]: int(value)
        for labels, value in m.series("crawler_spider_responses_total", **SPIDER).items()
    }
    assert exported == dict(statuses)
    # Pages reach the spider once each; a 503 was retried by the downloader.
    assert m.value("crawler_spider_pages_total", **SPIDER) == len(requests) - statuses["503"]
    errors = m.series("crawler_spider_errors_total", **SPIDER)
    # The refused host: its robots.txt (once) and the page's three attempts.
    assert {dict(labels)["kind"]: v for labels, v in errors.items()} == {
        "download:DownloadConnectionRefusedError": 4,
        "dead_letter": 1,
        "seed_rejected": 1,
    }
    log = exporter.log()
    assert "Traceback" not in log and log.count("Redis connected") == 1


def test_supervisor_restarts_a_killed_worker_and_stop_drains_one(redis_url, r, tmp_path):
    run_dir = tmp_path / "run"
    (run_dir / "logs").mkdir(parents=True)
    db_path = tmp_path / "items.db"
    monitor_port = free_port()
    # Short leases, so the killed worker's requests come back in seconds, not 30;
    # fast heartbeats, so the monitor sees it gone in seconds, not 15.
    (tmp_path / "operate_settings.py").write_text(
        "from spiders_project.settings import *  # noqa: F403\n"
        "FRONTIER_LEASE_TIMEOUT = 4.0\n"
        "STATS_PUBLISH_INTERVAL = 1.0\n"
        "STATS_HEARTBEAT_TTL = 3.0\n"
    )
    env_file = run_dir / "crawler.env"
    env_file.write_text(
        f"REDIS_URL='{redis_url}'\n"
        f"DB_URL='sqlite:///{db_path}'\n"
        f"MONITOR_PORT={monitor_port}\n"
        "CONCURRENT_REQUESTS=8\n"
        f"PYTHONPATH='{tmp_path}'\n"
        "SCRAPY_SETTINGS_MODULE=operate_settings\n"
    )
    config = render_config(
        run_dir,
        environment={
            "CRAWLER_HOME": str(ROOT),
            "CRAWLER_ENV_FILE": str(env_file),
            "CRAWLER_LOG_DIR": str(run_dir / "logs"),
            "CRAWLER_WORKERS": "2",
            "CRAWLER_RENDER_WORKERS": "0",
        },
        with_monitor=True,
    )
    supervisor = Supervisord(run_dir, config)
    metrics_url = f"http://127.0.0.1:{monitor_port}/metrics"
    with TestSite(pages=400, seed=22, latency=0.1) as site:
        supervisor.start()
        try:
            assert {state for state, _ in supervisor.states().values()} <= {"STARTING", "RUNNING"}
            r.lpush(K.start_urls, site.url)
            progress = lambda: r.llen(K.items) + len(stored_urls(db_path))  # noqa: E731
            wait_until(lambda: progress() > 80, 60, what="the crawl to be under way")

            # SIGKILL: supervisord starts a new worker-00 (a new pid, a new worker id).
            _, victim = supervisor.states()["worker-00"]
            os.kill(victim, signal.SIGKILL)
            wait_until(
                lambda: supervisor.states()["worker-00"][1] not in (0, victim),
                30,
                what="supervisord to restart worker-00",
            )
            log = (run_dir / "supervisord.log").read_text()
            assert re.search(r"exited: worker-00 \(terminated by SIGKILL", log), log

            # supervisorctl stop: a warm shutdown, in the middle of the crawl.
            wait_until(lambda: progress() > 160, 60, what="more of the crawl")
            assert progress() < len(site.page_urls())
            # Slow answers for a moment, so worker-01 has requests in flight to finish.
            site.latency = 1.5
            time.sleep(0.5)
            stop = supervisor.ctl("stop", "crawler:worker-01")
            site.latency = 0.1
            assert stop.returncode == 0 and "stopped" in stop.stdout, stop.stdout + stop.stderr
            assert supervisor.states()["worker-01"][0] == "STOPPED"
            log = (run_dir / "supervisord.log").read_text()
            assert re.search(r"stopped: worker-01 \(exit status 0\)", log), log
            worker_log = (run_dir / "logs" / "worker-01.log").read_text()
            assert re.search(r"Draining: finishing [1-9]\d* requests in flight", worker_log)
            assert "Frontier closed (shutdown): 0 unfinished requests handed back" in worker_log
            assert "signed off" in worker_log

            # The restarted worker finishes the crawl; every page is stored.
            wait_until(
                lambda: set(stored_urls(db_path)) == site.page_urls(),
                120,
                what="every page in the database",
            )
            urls = stored_urls(db_path)
            assert len(urls) == len(set(urls))

            # The monitor under supervisord: one worker alive, the killed one reported lost,
            # the stopped one gone (it signed off).
            host = socket.gethostname()

            def monitor_sees_the_kill() -> bool:
                m = scrape_url(metrics_url)
                return m.get("crawler_worker_up", worker=f"{host}:{victim}", **SPIDER) == 0

            wait_until(monitor_sees_the_kill, 30, what="the monitor to see the kill")
            m = scrape_url(metrics_url)
            assert m.value("crawler_workers_alive", **SPIDER) == 1
            _, restarted = supervisor.states()["worker-00"]
            workers = {
                dict(labels)["worker"]: value
                for labels, value in m.series("crawler_worker_up", **SPIDER).items()
            }
            assert workers == {f"{host}:{victim}": 0, f"{host}:{restarted}": 1}
            # Exact: what the db_writer committed. Monitoring counts: a SIGKILL loses what
            # the victim counted since its last publish (at most STATS_PUBLISH_INTERVAL, 1 s,
            # of its work, here at most 80 pages/s); they never exceed what was fetched.
            assert m.value("crawler_db_writer_items_written_total", **SPIDER) >= len(urls)
            items = m.value("crawler_spider_items_total", **SPIDER)
            assert len(urls) - 80 <= items <= len(urls) + 8
        finally:
            supervisor.stop()
    log = (run_dir / "supervisord.log").read_text()
    for name in ("worker-00", "db_writer", "monitor"):
        assert re.search(rf"stopped: {name} \(exit status 0\)", log), log
    for path in (run_dir / "logs").iterdir():
        assert "Traceback" not in path.read_text(), path
