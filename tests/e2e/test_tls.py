"""Every process over TLS (``rediss://``), certificates verified, host name
included: workers, a render worker, the db_writer, the monitor and the commands
against a TLS-only redis-server, a TLS-only Redis Cluster (``--tls-cluster``)
and a redis-server that asks for client certificates; a certificate that
must be refused is refused at start in one line (docs/SECURITY.md)."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest
import redis

from spiders_project.keys import RedisKeys
from tests.e2e.test_rendering_crawl import finish, stored
from tests.support.monitoring import Exporter
from tests.support.processes import (
    K,
    Proc,
    db_writer,
    items_drained,
    scrapy_command,
    stat,
    stored_urls,
    wait_until,
    worker,
)
from tests.support.services import RedisClusterGroup, RedisServer
from tests.support.site import JsSite, TestSite

pytestmark = pytest.mark.slow
CK = RedisKeys("distributed", cluster=True, shards=3)
CLUSTER = {"REDIS_CLUSTER": "true"}
# The words of the one line a refused certificate gives (redis_connection.tls_problem).
REFUSED = "TLS certificate problem"


def crawl_over_tls(
    url: str,
    client: redis.Redis,
    tmp_path: Path,
    procs: list[Proc],
    *,
    pages: int = 100,
    keys: RedisKeys = K,
    env: dict[str, str] | None = None,
    monitor: bool = True,
) -> list[Proc]:
    """A crawl of three hosts of ``pages`` pages each by two workers and the
    db_writer over ``url``; every page stored once, the monitor and
    crawlstatus read it. Returns the workers and the db_writer."""
    db_path = tmp_path / "items.db"
    with contextlib.ExitStack() as stack:
        site = stack.enter_context(TestSite(pages=pages, seed=26, hosts=3))
        client.lpush(keys.start_urls, *site.urls)
        workers = [
            worker(f"w{i}", url, tmp_path, "MAX_IDLE_TIME_BEFORE_CLOSE=2", env=env) for i in (1, 2)
        ]
        writer = db_writer("dbw", url, f"sqlite:///{db_path}", tmp_path, env=env)
        procs += [*workers, writer]
        if monitor:
            exporter = Exporter(url, tmp_path, *(f"{k}={v}" for k, v in (env or {}).items()))
            stack.callback(exporter.close)
        for w in workers:
            assert w.wait(120) == 0, w.log()[-3000:]
        wait_until(lambda: items_drained(client, keys), 60, what="the item buffer to drain")
        assert writer.stop(30) == 0, writer.log()[-3000:]
        urls = stored_urls(db_path)
        assert len(urls) == len(set(urls)), "a page stored twice"
        assert set(urls) == site.page_urls()
        if monitor:
            metrics = exporter.scrape()
            assert metrics.value("crawler_redis_up") == 1, exporter.log()[-3000:]
            queued = metrics.value("crawler_queue_length", spider="distributed", queue="requests")
            assert queued == 0
            assert metrics.value("crawler_dupefilter_size", spider="distributed") >= len(urls)
            assert "Traceback" not in exporter.log()
    status = scrapy_command(url, "crawlstatus", "--once", env=env)
    assert status.returncode == 0, status.stderr
    assert "nothing queued" in status.stdout, status.stdout
    if monitor:
        # The other commands over the same URL (and Redis' certificate checked).
        for argv in (("deadletters", "list"), ("dupefilter", "migrate")):
            done = scrapy_command(url, *argv, env=env)
            assert done.returncode == 0, done.stdout + done.stderr
    for proc in (*workers, writer):
        assert "Traceback" not in proc.log(), proc.log()[-3000:]
    return [*workers, writer]


def refused_in_one_line(proc: Proc, *words: str) -> str:
    """``proc`` exits 1 at start with one line that holds ``words``; that line."""
    assert proc.wait(60) == 1, proc.log()[-3000:]
    log = proc.log()
    assert "Traceback" not in log, log
    [line] = [line for line in log.splitlines() if REFUSED in line]
    assert all(word in line for word in words), line
    return line


@pytest.fixture
def tls_redis(pki):
    server = RedisServer(tls=pki)
    yield server
    server.stop()


def test_a_crawl_over_tls_on_one_redis(tls_redis, pki, tmp_path, procs):
    assert tls_redis.url.startswith("rediss://localhost:") and "ssl_ca_certs=" in tls_redis.url
    crawl_over_tls(tls_redis.url, tls_redis.client, tmp_path, procs)
    # Nothing but TLS: the server has no plain port to fall back to.
    with pytest.raises(redis.ConnectionError):
        redis.Redis(port=tls_redis.port, socket_timeout=2).ping()
    # crawlmove reads the source and writes the target over TLS, both verified.
    target = RedisServer(tls=pki)
    try:
        move = scrapy_command(target.url, "crawlmove", "--from", tls_redis.url)
        assert move.returncode == 0, move.stdout + move.stderr
        assert "Moved the crawl of distributed" in move.stdout
        assert target.client.get(K.seen) == tls_redis.client.get(K.seen)
    finally:
        target.stop()


def test_a_crawl_over_tls_on_a_redis_cluster(pki, tmp_path, procs):
    cluster = RedisClusterGroup(masters=3, tls=pki)
    try:
        assert cluster.url.startswith("rediss://")
        crawl_over_tls(cluster.url, cluster.client, tmp_path, procs, keys=CK, env=CLUSTER)
        assert int(cluster.client.get(CK.frontier_shards)) == 3  # auto: one per master
        # A worker that trusts another CA is refused at the first node.
        other = pki.url(cluster.nodes[0].port, ca=pki.other_ca)
        refused = worker("other-ca", other, tmp_path, env=CLUSTER)
        procs.append(refused)
        refused_in_one_line(refused, "Redis Cluster of", "self-signed certificate")
    finally:
        cluster.stop()


def test_mutual_tls_on_one_redis(pki, tmp_path, procs):
    server = RedisServer(tls=pki, tls_clients="yes")
    try:
        assert "ssl_certfile=" in server.url and "ssl_keyfile=" in server.url
        crawl_over_tls(server.url, server.client, tmp_path, procs, pages=30, monitor=False)
        # Without a client certificate: refused at start, in one line.
        bare = worker("bare", pki.url(server.port), tmp_path)
        procs.append(bare)
        assert bare.wait(60) == 1, bare.log()[-3000:]
        [line] = [line for line in bare.log().splitlines() if "cannot connect" in line]
        assert "ssl_certfile and ssl_keyfile" in line and "Traceback" not in bare.log()
    finally:
        server.stop()


def test_a_render_worker_over_mutual_tls(pki, tmp_path, procs):
    """A render worker (Chromium) and the db_writer, with client certificates."""
    server = RedisServer(tls=pki, tls_clients="yes")
    db_path = tmp_path / "items.db"
    try:
        with JsSite(pages=6, plain_pages=0, slow_pages=0) as site:
            seed = {"url": site.url, "meta": {"playwright": True}}
            server.client.lpush(K.start_urls, json.dumps(seed))
            render = worker(
                "render", server.url, tmp_path, "MAX_IDLE_TIME_BEFORE_CLOSE=2", "WORKER_ROLE=render"
            )
            writer = db_writer("dbw", server.url, f"sqlite:///{db_path}", tmp_path)
            procs += [render, writer]
            finish(server.client, writer, [render])
            assert set(stored(db_path)) == site.js_urls()
        assert stat(server.client, render, "render/requests") == 6
        for proc in (render, writer):
            assert "Traceback" not in proc.log(), proc.log()[-3000:]
    finally:
        server.stop()


def test_another_ca_and_a_wrong_host_name_are_refused_at_start(tls_redis, pki, tmp_path, procs):
    wrong = ("--tls-cert-file", str(pki.wrong_name_cert), "--tls-key-file", str(pki.wrong_name_key))
    wrong_name = RedisServer(*wrong, tls=pki)
    try:
        other_ca = pki.url(tls_redis.port, ca=pki.other_ca)
        started = {
            "worker-other-ca": worker("worker-other-ca", other_ca, tmp_path),
            "writer-other-ca": db_writer(
                "writer-other-ca", other_ca, f"sqlite:///{tmp_path}/x.db", tmp_path
            ),
            "worker-wrong-name": worker("worker-wrong-name", wrong_name.url, tmp_path),
        }
        procs += started.values()
        for name in ("worker-other-ca", "writer-other-ca"):
            refused_in_one_line(started[name], "self-signed certificate in certificate chain")
        refused_in_one_line(started["worker-wrong-name"], "Hostname mismatch", "'localhost'")
    finally:
        wrong_name.stop()


def test_verification_turned_off_works_and_warns_once(tls_redis, tmp_path, procs):
    url = f"rediss://localhost:{tls_redis.port}/0?ssl_cert_reqs=none"
    workers = crawl_over_tls(url, tls_redis.client, tmp_path, procs, pages=20, monitor=False)
    for proc in workers:
        warnings = [line for line in proc.log().splitlines() if "pose as Redis" in line]
        assert len(warnings) == 1, warnings
        assert "WARNING" in warnings[0] and "ssl_cert_reqs=none" in warnings[0]
