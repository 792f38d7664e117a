"""The worker's stats publish, the exporter, crawlstatus, and the deploy files, on real programs.

Redis is a private redis-server; the exporter is ``python -m monitor`` in its
own process; Prometheus and promtool are Debian's; units are checked by
``systemd-analyze verify`` where it exists.
"""

from __future__ import annotations

import configparser
import datetime
import functools
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from spiders_project.config import load_settings
from spiders_project.keys import RENDER
from spiders_project.keys.cookies import cookie_counts, cookie_jar, cookie_jars
from spiders_project.keys.db_writers import processing_of, writers
from spiders_project.keys.jobs import job_counts
from spiders_project.keys.stats import stats_history
from spiders_project.read_model.cluster_view import eta_seconds, pages_per_second, read_cluster
from spiders_project.read_model.contract import (
    CLOSED,
    LAST_SEEN_FIELD,
    RUN_FIELD,
    RUNNING,
    STATE_FIELD,
    WORKER_FIELD,
)
from spiders_project.read_model.host_steering import HostSteer
from spiders_project.redis_access import RedisState, SyncRedisCalls
from spiders_project.worker.heartbeat import (
    StatsPublishConfig,
    metric_counters,
    publish_call,
    publish_script,
)
from tests.support.monitoring import Exporter, Metrics
from tests.support.processes import PYTHON, ROOT, K, Proc, wait_until
from tests.support.services import free_port

DEPLOY = ROOT / "deploy"
PROMTOOL = shutil.which("promtool")
PROMETHEUS = shutil.which("prometheus")
CONFIG = StatsPublishConfig(
    interval=1.0,
    heartbeat_ttl=30.0,
    worker_retention=900.0,
    samples_retention=300.0,
    history_interval=60.0,
    history_retention=3600.0,
)
# What the issue asks the exporter to expose, at least.
REQUIRED = {
    "crawler_queue_length",
    "crawler_dupefilter_size",
    "crawler_workers_alive",
    "crawler_worker_last_seen_seconds",
    "crawler_pages_total",
    "crawler_items_total",
    "crawler_errors_total",
    "crawler_responses_total",
    "crawler_db_writer_items_written_total",
    "crawler_db_writer_lag_seconds",
    "crawler_redis_up",
    "crawler_redis_used_memory_bytes",
    "crawler_job_pages_total",
    "crawler_job_items_total",
    "crawler_job_queued",
    "crawler_job_in_flight",
    "crawler_job_leased",
    "crawler_job_dead_letters",
    "crawler_job_eta_seconds",
    "crawler_job_state",
}


@pytest.fixture
def exporters():
    started: list[Exporter] = []
    yield started
    for e in started:
        e.close()


def publish(
    r: redis.Redis,
    worker: str,
    run: str,
    stats: dict,
    *,
    first: bool = False,
    state: str = RUNNING,
    config: StatsPublishConfig = CONFIG,
) -> int:
    keys, args = publish_call(K, worker, run, first=first, state=state, config=config, stats=stats)
    return r.eval(publish_script().source, len(keys), *keys, *args)


def totals(r: redis.Redis) -> dict[str, int]:
    return {k.decode(): int(v) for k, v in r.hgetall(K.stats_totals).items()}


# --- the publish script ------------------------------------------------------------------


def test_metric_counters_from_scrapy_stats():
    stats = {
        "response_received_count": 7,
        "item_scraped_count": 5,
        "downloader/response_status_count/200": 6,
        "downloader/response_status_count/503": 2,
        "downloader/exception_type_count/twisted.internet.error.TimeoutError": 3,
        "downloader/exception_type_count/builtins.TimeoutError": 1,
        "spider_exceptions/ValueError": 1,
        "dead_letters/count": 2,
        "seeds/rejected": 1,
        "cookies/relogins": 2,
        "cookies/sessions_retired": 1,
        "log_count/INFO": 40,
        "start_time": datetime.datetime.now(datetime.UTC),
    }
    assert metric_counters(stats) == {
        "pages": 7,
        "items": 5,
        "responses:200": 6,
        "responses:503": 2,
        "errors:download:TimeoutError": 4,
        "errors:spider:ValueError": 1,
        "errors:dead_letter": 2,
        "errors:seed_rejected": 1,
        "cookies:relogins": 2,
        "cookies:sessions_retired": 1,
    }
    assert metric_counters({}) == {"pages": 0, "items": 0}


def test_totals_never_go_down_across_restarts_replays_and_reused_ids(r):
    # Worker a publishes twice; the first publish is sent twice (a replayed transaction).
    assert publish(r, "n1:1", "run-a", {"response_received_count": 10}, first=True) == 10
    assert publish(r, "n1:1", "run-a", {"response_received_count": 10}, first=True) == 10
    stats = {
        "response_received_count": 25,
        "downloader/exception_type_count/twisted.internet.error.TimeoutError": 2,
    }
    assert publish(r, "n1:1", "run-a", stats) == 25
    assert publish(r, "n1:1", "run-a", stats) == 25
    # Worker a is killed (no last publish); its replacement b counts from zero.
    assert publish(r, "n1:2", "run-b", {"response_received_count": 5}, first=True) == 30
    assert publish(r, "n1:2", "run-b", {"response_received_count": 7}, state=CLOSED) == 32
    assert totals(r) == {"pages": 32, "errors:download:TimeoutError": 2}

    # b signed off: no heartbeat, not listed; its hash stays a while, marked closed.
    assert r.exists(K.worker_heartbeat("n1:2")) == 0
    assert r.zscore(K.workers, "n1:2") is None
    fields = r.hgetall(K.worker_stats("n1:2"))
    assert fields[STATE_FIELD.encode()] == CLOSED.encode()
    assert fields[WORKER_FIELD.encode()] == b"n1:2" and fields[RUN_FIELD.encode()] == b"run-b"
    assert r.zscore(K.stats_samples, b"%s 32" % fields[LAST_SEEN_FIELD.encode()]) is not None
    assert 0 < r.pttl(K.worker_stats("n1:2")) <= CONFIG.worker_retention * 1000
    # a is still listed, its heartbeat alive until its TTL runs out.
    assert 0 < r.pttl(K.worker_heartbeat("n1:1")) <= CONFIG.heartbeat_ttl * 1000
    seconds, micros = r.time()
    assert abs(r.zscore(K.workers, "n1:1") - (seconds + micros / 1e6)) < 5

    # A new process reusing a's id (same host:pid): its counts are its own, in full.
    assert publish(r, "n1:1", "run-c", {"response_received_count": 3}, first=True) == 35
    assert r.hget(K.worker_stats("n1:1"), "errors:download:TimeoutError") is None
    # Its hash expired while it was cut off from Redis: re-based, never counted twice.
    r.delete(K.worker_stats("n1:1"))
    assert publish(r, "n1:1", "run-c", {"response_received_count": 9}) == 35
    assert publish(r, "n1:1", "run-c", {"response_received_count": 12}) == 38

    # A worker not seen for longer than the retention is forgotten by the next publish.
    r.zadd(K.workers, {"gone:9": seconds - CONFIG.worker_retention - 10})
    publish(r, "n1:1", "run-c", {"response_received_count": 12})
    assert r.zscore(K.workers, "gone:9") is None
    # Publishes leave (time, pages total) samples (two in one millisecond with one total
    # are one sample).
    pages = [int(m.split()[1]) for m in r.zrange(K.stats_samples, 0, -1)]
    assert pages == sorted(pages) and pages[0] == 10 and pages[-1] == 38


def test_the_hour_history_keeps_one_sample_a_minute_for_the_whole_cluster(r):
    """Two workers publishing every 5 s for two hours (Redis' clock stepped, not
    slept through) leave one sample a minute in stats:history, the last hour's."""
    seconds, _ = r.time()
    start_ms = (seconds - 2 * 3600) * 1000
    pages = 0
    for step in range(2 * 3600 // 5):
        for worker in ("n1:1", "n2:1"):
            pages += 10
            now = start_ms + step * 5000 + (2500 if worker == "n2:1" else 0)
            keys, args = publish_call(
                K,
                worker,
                "run-" + worker,
                first=step == 0,
                state=RUNNING,
                config=CONFIG,
                stats={"response_received_count": pages // 2},
                now=now,
            )
            r.eval(publish_script().source, len(keys), *keys, *args)
    members = (m.split() for m in r.zrange(stats_history(K), 0, -1))
    history = [(float(at), int(total)) for at, total in members]
    last = (start_ms + (2 * 3600 // 5 - 1) * 5000 + 2500) / 1000
    assert 59 <= len(history) <= 62, len(history)
    times = [at for at, _ in history]
    assert all(60 <= b - a < 65 for a, b in zip(times, times[1:], strict=False)), times
    # Trimmed as a sample goes in: the oldest is at most an interval past the retention.
    assert last - times[0] <= CONFIG.history_retention + CONFIG.history_interval
    assert last - times[-1] < CONFIG.history_interval
    assert [total for _, total in history] == sorted(total for _, total in history)
    # The fine samples are the last five minutes' only, every publish.
    assert r.zcard(K.stats_samples) in (2 * 300 // 5, 2 * 300 // 5 + 1)


# --- the exporter ------------------------------------------------------------------------


def item(fetched_at: float) -> bytes:
    at = datetime.datetime.fromtimestamp(fetched_at, datetime.UTC)
    return json.dumps({"url": "http://x/", "fetched_at": at.isoformat()}).encode()


def fill_redis(r: redis.Redis) -> float:
    """Known crawl state in every key the exporter reads; returns Redis' time."""
    seconds, micros = r.time()
    now = seconds + micros / 1e6
    r.lpush(K.start_urls, "http://a/", "http://b/", "http://c/")
    r.set(K.requests_size, 40)
    # Two hosts an operator steered (scrapy frontier host): one slowed, one blocked.
    r.hset(K.host_steering, "slow.example", HostSteer(delay=2.5).to_json())
    r.hset(K.host_steering, "bad.example", HostSteer(blocked=True).to_json())
    r.zadd(K.leases, {f"lease-{i}": 1 for i in range(4)})
    # The render queue (WORKER_ROLE): counted in requests and leases, and shown apart.
    r.set(K.in_lane(RENDER).requests_size, 2)
    r.zadd(K.in_lane(RENDER).leases, {"lease-r": 1})
    r.rpush(K.items, item(now - 30), item(now))
    # A db_writer's batch in hand: its processing list, counted in the writers' hash.
    r.rpush(processing_of(K, "w1"), item(now - 60))
    r.hset(writers(K), mapping={"w1": 1, "w2": 0})
    r.lpush(K.dead, "d1", "d2")
    r.lpush(K.start_urls_rejected, "x")
    r.lpush(K.requests_rejected, "y", "z")
    r.lpush(K.dead_rejected, "w")
    r.sadd(K.dupefilter, *(f"fp{i}" for i in range(100)))
    r.hset(
        K.db_writer_stats,
        mapping={"items_written": 1000, "rejected": 3, "batches": 7, "last_batch_at": 1795000000},
    )
    busy = {
        "response_received_count": 120,
        "item_scraped_count": 100,
        "downloader/response_status_count/200": 110,
        "downloader/response_status_count/503": 12,
        "downloader/exception_type_count/twisted.internet.error.TimeoutError": 4,
        "spider_exceptions/ValueError": 1,
        "dead_letters/count": 2,
        "cookies/relogins": 2,
        "cookies/sessions_retired": 1,
        "start_time": datetime.datetime.now(datetime.UTC),
    }
    publish(r, "node1:100", "run-1", {"response_received_count": 0}, first=True)
    publish(r, "node1:100", "run-1", busy)
    lost = {
        "response_received_count": 30,
        "downloader/response_status_count/200": 30,
        "cookies/relogins": 1,
    }
    publish(r, "node2:200", "run-2", lost, first=True)
    r.delete(K.worker_heartbeat("node2:200"))  # its TTL ran out: killed
    # A job fetching 2 pages/s for the last 30 s (ack.lua's marks), 60 queued.
    ms = int(now * 1000)
    r.hset(K.jobs, "shop", json.dumps({"state": "running", "started_at": ms - 60_000}))
    r.hset(
        job_counts(K),
        mapping={
            "shop|pages": 80,
            "shop|items": 70,
            "shop|dead_letters": 1,
            "shop|queued": 50,
            "shop|later": 10,
            "shop|leased": 7,
            "shop|slots": 4,
            "shop|rate": f"{ms - 30_000} 20 {ms - 30_000} 20 {ms - 500}",
        },
    )
    # Three shared cookie jars (the layout of docs/SECURITY.md, "Cookies"): the
    # exporter reads their index and counts; the jar itself holds a value it never reads.
    r.zadd(cookie_jars(K), {"default": ms, "user-1": ms, "user-2": ms})
    r.hset(cookie_counts(K), mapping={"default": 3, "user-1": 2, "user-2": 0})
    r.hset(cookie_jar(K, "default"), ".a\t/\tsid", json.dumps({"value": "PLANTED-cookie"}))
    return now


def test_exporter_reports_what_redis_holds(redis_url, r, tmp_path, exporters):
    now = fill_redis(r)
    r.config_set("maxmemory", 512 * 1024 * 1024)
    try:
        exporter = Exporter(redis_url, tmp_path)
        exporters.append(exporter)
        m = exporter.scrape()
        info = r.info("memory")
    finally:
        r.config_set("maxmemory", 0)
    spider = {"spider": "distributed"}

    queues = {
        "start_urls": 3,
        "requests": 42,
        "render": 2,
        "leases": 5,
        "items": 2,
        "items_processing": 1,
        "dead": 2,
        "rejected": 4,
    }
    assert {q: m.value("crawler_queue_length", queue=q, **spider) for q in queues} == queues
    rejected = {"start_urls": 1, "requests": 2, "items": 0, "dead": 1}
    assert {
        s: m.value("crawler_rejected_entries", source=s, **spider) for s in rejected
    } == rejected
    assert m.value("crawler_dupefilter_size", **spider) == 100
    assert m.value("crawler_hosts_blocked", **spider) == 1
    assert m.value("crawler_hosts_steered", **spider) == 2
    assert (
        m.value("crawler_host_overrides", host="slow.example", kind="delay_seconds", **spider)
        == 2.5
    )
    assert m.value("crawler_host_overrides", host="bad.example", kind="blocked", **spider) == 1

    assert m.value("crawler_workers_alive", **spider) == 1
    assert m.value("crawler_worker_up", worker="node1:100", **spider) == 1
    assert m.value("crawler_worker_up", worker="node2:200", **spider) == 0
    assert abs(m.value("crawler_worker_last_seen_seconds", worker="node1:100", **spider) - now) < 5
    w1 = {"worker": "node1:100", **spider}
    assert m.value("crawler_pages_total", **w1) == 120
    assert m.value("crawler_items_total", **w1) == 100
    assert m.value("crawler_pages_total", worker="node2:200", **spider) == 30
    assert m.series("crawler_errors_total", **w1) == {
        frozenset({**w1, "kind": "download:TimeoutError"}.items()): 4,
        frozenset({**w1, "kind": "spider:ValueError"}.items()): 1,
        frozenset({**w1, "kind": "dead_letter"}.items()): 2,
    }
    assert m.value("crawler_responses_total", status="503", **w1) == 12
    # The spider's all-time totals: both workers.
    assert m.value("crawler_spider_pages_total", **spider) == 150
    assert m.value("crawler_spider_items_total", **spider) == 100
    assert m.value("crawler_spider_responses_total", status="200", **spider) == 140
    assert m.value("crawler_spider_errors_total", kind="download:TimeoutError", **spider) == 4

    assert m.value("crawler_db_writer_items_written_total", **spider) == 1000
    assert m.value("crawler_db_writer_rejected_total", **spider) == 3
    assert m.value("crawler_db_writer_batches_total", **spider) == 7
    assert m.value("crawler_db_writer_last_batch_timestamp_seconds", **spider) == 1795000000
    # The oldest item not in the database is the db_writer's batch in hand (60 s old).
    assert 59 <= m.value("crawler_db_writer_lag_seconds", **spider) < 65

    assert m.value("crawler_redis_up") == 1
    assert m.value("crawler_redis_maxmemory_bytes") == 512 * 1024 * 1024
    assert abs(m.value("crawler_redis_used_memory_bytes") - info["used_memory"]) < 1024 * 1024

    job = {"spider": "distributed", "crawl_job": "shop"}
    assert m.value("crawler_job_pages_total", **job) == 80
    assert m.value("crawler_job_items_total", **job) == 70
    assert m.value("crawler_job_queued", **job) == 60
    assert m.value("crawler_job_in_flight", **job) == 4
    assert m.value("crawler_job_leased", **job) == 3
    assert m.value("crawler_job_dead_letters", **job) == 1
    assert 20 <= m.value("crawler_job_eta_seconds", **job) <= 30  # 50 queued at ~2 pages/s
    assert m.value("crawler_job_state", state="running", **job) == 1
    assert m.value("crawler_job_state", state="finished", **job) == 0

    assert m.value("crawler_cookie_jars", **spider) == 3
    assert m.value("crawler_cookies", **spider) == 5
    # Summed over the workers, all workers ever, as the other spider totals.
    assert m.value("crawler_cookie_relogins_total", **spider) == 3
    assert m.value("crawler_cookie_sessions_retired_total", **spider) == 1
    assert "PLANTED-cookie" not in m.text
    check_names_and_help(m)


def check_names_and_help(m: Metrics) -> None:
    """Prometheus conventions, and every metric the deploy files use is really exposed."""
    names = m.names()
    assert names >= REQUIRED, REQUIRED - names
    for family, help_text in m.help.items():
        if not family.startswith("crawler_"):
            continue
        assert re.fullmatch(r"crawler_[a-z_]+", family)
        assert len(help_text) > 10, family
        if m.types[family] == "counter":
            assert f"{family}_total" in names and not family.endswith("_total")
    for path in (
        DEPLOY / "prometheus" / "alerts.yml",
        DEPLOY / "grafana" / "dashboards" / "crawler.json",
    ):
        used = set(re.findall(r"\bcrawler_[a-z_]+", path.read_text()))
        assert used, path
        assert used <= names, f"{path.name} uses metrics the exporter lacks: {used - names}"


def test_crawlstatus_prints_the_same_numbers(redis_url, r):
    fill_redis(r)
    env = {"REDIS_URL": redis_url}
    once = run_scrapy(env, "crawlstatus", "--once")
    assert once.returncode == 0, once.stderr
    out = once.stdout
    assert (
        "queues      start_urls 3 | requests 42 | render 2 | leases 5 | items 2 | "
        "items_processing 1 | dead 2 | rejected 4"
    ) in out
    assert "dupefilter  100 fingerprints" in out
    assert "150 pages, 100 items, 7 errors in all" in out
    assert "db_writer   1,000 items written; lag 6" in out  # 60-odd seconds
    assert "workers     1 alive, 1 lost" in out
    assert re.search(r"node1:100 +alive  last seen +\d+\.\d s ago  pages 120  items 100", out)
    assert re.search(r"node2:200 +LOST   last seen", out)
    shop = r"job +shop: running, 80 pages, 70 items, 50 queued, 4 in flight, 3 leased"
    assert re.search(shop, out)

    as_json = run_scrapy(env, "crawlstatus", "--once", "--json")
    data = json.loads(as_json.stdout)["spiders"][0]
    assert data["queues"]["requests"] == 42 and data["workers_alive"] == 1
    assert data["totals"]["pages"] == 150

    down = run_scrapy({"REDIS_URL": f"redis://127.0.0.1:{free_port()}/0"}, "crawlstatus", "--once")
    assert down.returncode == 1
    assert down.stderr.startswith("ERROR: cannot read Redis at redis://127.0.0.1:")
    assert "Traceback" not in down.stderr


def test_pages_per_second_and_eta_from_the_samples(redis_url, r):
    """Pages/s over the window comes from the totals' samples and decays once work stops."""
    r.set(K.requests_size, 300)
    seconds, _ = r.time()
    # Samples as publishers leave them: 10 pages/s for the last 100 s.
    r.zadd(K.stats_samples, {f"{seconds - t} {1000 - 10 * t}": seconds - t for t in range(100)})
    r.hset(K.stats_totals, "pages", 1000)
    calls = SyncRedisCalls(r, RedisState(redis_url, 0.2, 5.0, logging.getLogger("test")))
    send = functools.partial(calls.pipelined, retry=False)
    view = read_cluster(send, ["distributed"], worker_retention=900, samples=True).spiders[0]
    rate, span = pages_per_second(view, seconds, 60)
    assert span == 60 and rate == pytest.approx(10, rel=0.01)
    assert eta_seconds(view, rate) == pytest.approx(30, rel=0.01)
    # 60 s later with no new page: nothing in the window grew.
    rate, _ = pages_per_second(view, seconds + 60, 60)
    assert rate == 0
    assert eta_seconds(view, rate) is None


def run_scrapy(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYTHON, "-m", "scrapy", *args],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_exporter_answers_when_redis_is_down_and_logs_each_state_change(tmp_path, exporters):
    port = free_port()
    exporter = Exporter(f"redis://127.0.0.1:{port}/0", tmp_path)
    exporters.append(exporter)
    started = time.monotonic()
    m = exporter.scrape()
    assert time.monotonic() - started < 3
    assert m.value("crawler_redis_up") == 0
    assert not m.series("crawler_queue_length")
    exporter.scrape()

    server = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", ""],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until(lambda: exporter.scrape().get("crawler_redis_up") == 1, 20, what="Redis up")
        assert (
            exporter.scrape().value("crawler_queue_length", spider="distributed", queue="dead") == 0
        )
    finally:
        server.terminate()
        server.wait(10)
    assert exporter.scrape().value("crawler_redis_up") == 0

    exporter.proc.signal(signal.SIGTERM)
    assert exporter.proc.wait(15) == 0
    log = exporter.log()
    assert log.count("listening on http://127.0.0.1:") == 1
    assert log.count("Redis connection lost") == 2  # at start, and after the restart
    assert log.count("Redis reconnected at") == 1
    assert "Redis connected at" not in log  # said at start only when Redis answered then
    assert log.rstrip().endswith("stopped (SIGTERM)")
    assert "Traceback" not in log


@pytest.fixture
def own_redis(start_redis) -> Iterator[tuple[str, redis.Redis]]:
    """A redis-server of this test alone, on a free port: a stuck script cannot hurt others."""
    _, url = start_redis()
    client = redis.Redis.from_url(url)
    yield url, client
    client.close()


def scrape_200(exporter: Exporter) -> Metrics:
    with urllib.request.urlopen(exporter.url, timeout=10) as response:
        assert response.status == 200
        return Metrics(response.read().decode())


def refuses(r: redis.Redis, code: str) -> bool:
    """True while Redis answers PING with the error reply ``code`` (BUSY)."""
    try:
        r.ping()
    except redis.ResponseError as exc:
        return exc.status_code == code or str(exc).startswith(code)
    return False


def test_exporter_answers_through_error_replies(own_redis, tmp_path, exporters):
    """WRONGTYPE and BUSY: each scrape answers 200 with crawler_redis_up 0, then 1 again.

    LOADING is not staged: a slowed DEBUG RELOAD does not answer LOADING reliably on
    Redis 7.0. The call path raises RedisUnavailable for it, as for an unreachable Redis.
    """
    url, r = own_redis
    r.lpush(K.dead, "d1")
    exporter = Exporter(url, tmp_path)
    exporters.append(exporter)

    def dead() -> float | None:
        m = scrape_200(exporter)
        if m.value("crawler_redis_up") == 0:
            assert not m.series("crawler_queue_length")
            return None
        return m.value("crawler_queue_length", spider="distributed", queue="dead")

    assert dead() == 1
    # A key someone overwrote: the pipeline's ZCARD of the leases answers WRONGTYPE.
    r.set(K.leases, "not a sorted set")
    assert dead() is None
    assert dead() is None
    status = run_scrapy({"REDIS_URL": url}, "crawlstatus", "--once")
    assert status.returncode == 1 and "Traceback" not in status.stderr
    [line] = status.stderr.splitlines()
    assert line.startswith(f"ERROR: cannot read Redis at {url}: ResponseError: ")
    assert "ZCARD distributed:requests:leases" in line and "WRONGTYPE" in line
    r.delete(K.leases)
    assert dead() == 1

    # A script that runs past busy-reply-threshold: every other command answers BUSY.
    r.config_set("busy-reply-threshold", 50)
    spin = (
        "local t = tonumber(redis.call('TIME')[1]) + 3 "
        "while tonumber(redis.call('TIME')[1]) < t do end return 1"
    )
    busy = threading.Thread(target=lambda: redis.Redis.from_url(url).eval(spin, 0))
    busy.start()
    try:
        wait_until(lambda: refuses(r, "BUSY"), 10, what="Redis to answer BUSY")
        assert dead() is None
    finally:
        busy.join(30)
    assert dead() == 1

    assert exporter.proc.poll() is None
    log = exporter.log()
    assert "Traceback" not in log
    # The wrapper names the read that met the broken key.
    assert "Redis refused read_cluster: " in log and "WRONGTYPE" in log


def test_exporter_refuses_a_port_in_use_and_bad_settings(redis_url, tmp_path, exporters):
    exporter = Exporter(redis_url, tmp_path)
    exporters.append(exporter)
    argv = [PYTHON, "-m", "monitor", "-s", f"MONITOR_PORT={exporter.port}"]
    taken = Proc("taken", argv, {"REDIS_URL": redis_url}, tmp_path / "taken.log")
    assert taken.wait(30) == 1
    assert f"cannot listen on 127.0.0.1:{exporter.port}" in taken.log()
    bad = Proc(
        "bad", [*argv[:-1], "MONITOR_SPIDERS="], {"REDIS_URL": redis_url}, tmp_path / "bad.log"
    )
    assert bad.wait(30) == 2
    assert "MONITOR_SPIDERS='': names no spider" in bad.log()


# --- Prometheus ----------------------------------------------------------------------------


@pytest.mark.skipif(PROMTOOL is None, reason="promtool not installed (apt-get install prometheus)")
def test_promtool_accepts_the_config_and_the_alert_rules_behave():
    assert PROMTOOL is not None
    prometheus_dir = DEPLOY / "prometheus"
    for args in (
        ["check", "config", "prometheus.yml"],
        ["check", "rules", "alerts.yml"],
        ["test", "rules", "alerts_test.yml"],
    ):
        done = subprocess.run(
            [PROMTOOL, *args], cwd=prometheus_dir, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert "SUCCESS" in done.stdout + done.stderr


def prometheus_config(tmp_path: Path, target: str) -> Path:
    """deploy/prometheus/prometheus.yml with the test's exporter and a 1 s scrape interval."""
    text = (DEPLOY / "prometheus" / "prometheus.yml").read_text()
    assert '"127.0.0.1:9410"' in text and "scrape_interval: 15s" in text
    text = text.replace('"127.0.0.1:9410"', f'"{target}"')
    text = text.replace("scrape_interval: 15s", "scrape_interval: 1s")
    text = text.replace("evaluation_interval: 15s", "evaluation_interval: 1s")
    text = text.replace("scrape_timeout: 10s", "scrape_timeout: 1s")
    config = tmp_path / "prometheus.yml"
    config.write_text(text)
    shutil.copy(DEPLOY / "prometheus" / "alerts.yml", tmp_path / "alerts.yml")
    return config


def query(base: str, expr: str) -> list[dict]:
    url = f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=10) as response:
        body = json.load(response)
    assert body["status"] == "success", body
    return body["data"]["result"]


@pytest.mark.slow
@pytest.mark.skipif(PROMETHEUS is None, reason="prometheus not installed")
def test_a_real_prometheus_scrapes_the_exporter(redis_url, r, tmp_path, exporters):
    assert PROMETHEUS is not None and PROMTOOL is not None
    r.lpush(K.start_urls, "http://a/", "http://b/", "http://c/")
    exporter = Exporter(redis_url, tmp_path)
    exporters.append(exporter)
    config = prometheus_config(tmp_path, f"127.0.0.1:{exporter.port}")
    check = subprocess.run(
        [PROMTOOL, "check", "config", str(config)], capture_output=True, text=True, timeout=60
    )
    assert check.returncode == 0, check.stdout + check.stderr
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    prometheus = Proc(
        "prometheus",
        [
            PROMETHEUS,
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        {},
        tmp_path / "prometheus.log",
    )
    try:

        def has(expr: str, value: str) -> bool:
            assert prometheus.poll() is None, prometheus.log()[-3000:]
            try:
                result = query(base, expr)
            except OSError:
                return False
            return [sample["value"][1] for sample in result] == [value]

        wait_until(lambda: has("crawler_redis_up", "1"), 60, what="Prometheus to scrape")
        wait_until(
            lambda: has('crawler_queue_length{spider="distributed",queue="start_urls"}', "3"),
            30,
            what="the queue metric",
        )
        assert has('up{job="crawler"}', "1")
        with urllib.request.urlopen(f"{base}/api/v1/rules", timeout=10) as response:
            groups = json.load(response)["data"]["groups"]
        rules = [rule for group in groups for rule in group["rules"]]
        alerts = (DEPLOY / "prometheus" / "alerts.yml").read_text()
        assert len(rules) == len(re.findall(r"^\s+- alert: ", alerts, re.M)) == 12, rules
        assert all(rule["health"] != "err" for rule in rules), rules
    finally:
        prometheus.stop(30)
        prometheus.close()


# --- Grafana -------------------------------------------------------------------------------


def test_grafana_dashboard_and_provisioning():
    grafana = DEPLOY / "grafana"
    dashboard = json.loads((grafana / "dashboards" / "crawler.json").read_text())
    assert dashboard["uid"] and dashboard["title"]
    panels = [p for p in dashboard["panels"] if p["type"] != "row"]
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in panels:
        assert panel["targets"] and panel["datasource"]["uid"] == "${datasource}", panel["title"]
        assert all(t["expr"].strip() for t in panel["targets"])
        assert set(panel["gridPos"]) == {"x", "y", "w", "h"}
        assert panel["gridPos"]["x"] + panel["gridPos"]["w"] <= 24
    titles = " | ".join(p["title"].lower() for p in panels)
    for topic in (
        "throughput",
        "queue",
        "workers",
        "errors by kind",
        "db_writer lag",
        "redis memory",
        "hosts blocked",
        "host overrides",
        "job pages/s",
        "job state and eta",
    ):
        assert topic in titles, topic
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["query"] == "prometheus"
    assert "crawler_queue_length" in variables["spider"]["definition"]

    source = (grafana / "provisioning" / "datasources" / "crawler.yml").read_text()
    assert "type: prometheus" in source and "apiVersion: 1" in source
    provider = (grafana / "provisioning" / "dashboards" / "crawler.yml").read_text()
    assert "type: file" in provider and "path: /var/lib/grafana/dashboards/crawler" in provider


# --- systemd -------------------------------------------------------------------------------

UNITS = (
    "crawler-worker@.service",
    "crawler-render@.service",
    "crawler-db-writer.service",
    "crawler-monitor.service",
)


def read_unit(path: Path) -> configparser.RawConfigParser:
    unit = configparser.RawConfigParser(strict=False, interpolation=None)
    unit.optionxform = str  # type: ignore[assignment,method-assign]
    unit.read(path)
    return unit


def test_systemd_units_have_what_operations_need():
    settings = load_settings()
    drain = settings.getfloat("SHUTDOWN_GRACE_PERIOD") + settings.getfloat("FRONTIER_CLOSE_TIMEOUT")
    supervisor = read_unit(DEPLOY / "supervisor" / "crawler.conf")
    commands = {
        "crawler-worker@.service": supervisor.get("program:worker", "command"),
        "crawler-render@.service": supervisor.get("program:render", "command"),
        "crawler-db-writer.service": supervisor.get("program:db_writer", "command"),
        "crawler-monitor.service": supervisor.get("program:monitor", "command"),
    }
    for name in UNITS:
        unit = read_unit(DEPLOY / "systemd" / name)
        service = unit["Service"]
        assert service["Restart"] == "always", name
        assert service["EnvironmentFile"] == "/etc/crawler/env", name
        assert service["KillSignal"] == "SIGTERM", name
        assert service["WorkingDirectory"] == "/opt/crawler", name
        assert unit["Install"]["WantedBy"] == "crawler.target", name
        assert unit["Unit"]["PartOf"] == "crawler.target", name
        # The same program as under supervisord (which starts it through run-with-env).
        program = commands[name].split(" ", 1)[1].replace("%(ENV_CRAWLER_HOME)s", "/opt/crawler")
        assert service["ExecStart"] == program, name
        if name.startswith(("crawler-worker@", "crawler-render@")):
            assert float(service["TimeoutStopSec"]) > drain
            assert service["KillMode"] == "mixed"
    target = read_unit(DEPLOY / "systemd" / "crawler.target")
    assert target["Unit"]["Wants"].split() == [
        "crawler-db-writer.service",
        "crawler-monitor.service",
    ]


@pytest.mark.skipif(
    shutil.which("systemd-analyze") is None,
    reason="no systemd-analyze: `make setup` installs it (Debian package systemd)",
)
def test_systemd_analyze_verifies_the_units(tmp_path):
    """The units with the checkout's paths (verify wants their programs to exist)."""
    for path in (DEPLOY / "systemd").iterdir():
        (tmp_path / path.name).write_text(path.read_text().replace("/opt/crawler", str(ROOT)))
    done = subprocess.run(
        [
            "systemd-analyze",
            "verify",
            "--man=no",
            "./crawler.target",
            "./crawler-worker@1.service",
            "./crawler-worker@8.service",
            "./crawler-render@1.service",
            "./crawler-db-writer.service",
            "./crawler-monitor.service",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    # verify only warns (exit 0) about unknown keys: any output is a failure here.
    assert done.returncode == 0 and done.stdout + done.stderr == "", done.stdout + done.stderr
