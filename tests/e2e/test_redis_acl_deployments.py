"""The users of ``scrapy redis-acl`` beyond one plain Redis: a render worker,
a Redis Cluster of three masters, and Sentinel with a replica.

Every server loads the generated file (the default user off) and every
process logs in as its role's user; each test ends with Redis' ACL LOG of
every server empty: nothing was refused to anyone, scripts' own calls included.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator

import pytest
import redis

from spiders_project.keys.cookies import cookie_jar
from spiders_project.redis_access.acl import REPLICA, SENTINEL, role_named
from tests.e2e.test_cluster import CK, crawled_once, sites_on_every_shard
from tests.e2e.test_rendering_crawl import (
    BLOCK_TEST_TRACKER,
    browser_processes,
    finish,
    stored,
)
from tests.support.acl_users import (
    ADMIN,
    PASSWORDS,
    SERVER_OPTIONS,
    AclRedis,
    acl_text,
    denials,
    role_url,
    write_acl_file,
)
from tests.support.monitoring import Exporter
from tests.support.processes import (
    K,
    db_writer,
    items_drained,
    scrapy_command,
    stat,
    stored_urls,
    wait_until,
    worker,
)
from tests.support.sentinels import SentinelGroup
from tests.support.services import RedisClusterGroup, free_port
from tests.support.site import JsSite, TestSite

pytestmark = pytest.mark.slow
IDLE = "MAX_IDLE_TIME_BEFORE_CLOSE=2"
# A replica (and a demoted master) logs in to its master as crawler-replica.
REPLICATION = ("--masteruser", REPLICA.user, "--masterauth", PASSWORDS[REPLICA.name])


def test_a_render_worker_renders_as_crawler_worker(tmp_path, procs):
    server = AclRedis(tmp_path / "redis", acl_text("distributed"))
    db_path = tmp_path / "items.db"
    try:
        with JsSite(pages=6, plain_pages=0, slow_pages=0) as site:
            operator = server.client("operator")
            operator.lpush(
                K.start_urls, json.dumps({"url": site.url, "meta": {"playwright": True}})
            )
            operator.close()
            render = worker(
                "render",
                server.url("worker"),
                tmp_path,
                IDLE,
                "WORKER_ROLE=render",
                BLOCK_TEST_TRACKER,
            )
            writer = db_writer("dbw", server.url("db_writer"), f"sqlite:///{db_path}", tmp_path)
            procs += [render, writer]
            wait_until(
                lambda: browser_processes(render.pid), 60, what="the render worker's browser"
            )
            finish(server.admin, writer, [render])
            assert set(stored(db_path)) == site.js_urls()
        assert stat(server.admin, render, "render/requests") == 6
        assert server.denials() == []
        assert "Traceback" not in render.log()
    finally:
        server.close()


def refused_at_start(role: str, url: str, server, tmp_path, procs, env: dict) -> None:
    """With LREM taken from ``role``'s user on ``server`` only, a worker
    refuses to start, in one line naming LREM."""
    server.execute_command("ACL", "SETUSER", role_named(role).user, "-lrem")
    proc = worker("refused", url, tmp_path, IDLE, env=env)
    procs.append(proc)
    assert proc.wait(60) == 1, proc.log()[-3000:]
    (line,) = [line for line in proc.log().splitlines() if "may not run" in line]
    assert "LREM" in line and "Traceback" not in proc.log(), proc.log()[-3000:]


@pytest.fixture
def acl_cluster(tmp_path) -> Iterator[RedisClusterGroup]:
    acl = write_acl_file(tmp_path / "acl", acl_text("distributed", cluster=True, servers=True))
    options = ("--aclfile", str(acl), *REPLICATION, *SERVER_OPTIONS)
    # A replica each: they replicate as crawler-replica (the group waits for their links).
    group = RedisClusterGroup(masters=3, replicas=1, options=options, login=ADMIN)
    yield group
    group.stop()


def test_each_role_does_its_job_as_its_user_on_a_cluster(acl_cluster, tmp_path, procs):
    """Seeds on one Redis, moved onto the cluster (crawlmove), crawled by a
    worker, written by the db_writer, watched by the monitor, the dead letter
    requeued and the old fingerprints migrated: every role on every master
    under its own user (deadletters list and purge, and crawlstatus as the
    operator, are the same calls as on one Redis: test_redis_acl_operator.py)."""
    cluster = acl_cluster
    env = {"REDIS_CLUSTER": "true"}

    def url(role: str) -> str:
        return role_url(role, cluster.nodes[0].port)

    def scrapy(role: str, *argv: str) -> str:
        done = scrapy_command(url(role), *argv, env=env)
        assert done.returncode == 0, (argv, done.stdout, done.stderr)
        return done.stdout

    source = AclRedis(tmp_path / "source", acl_text("distributed"))
    db_path = tmp_path / "items.db"
    try:
        with contextlib.ExitStack() as stack:
            sites = sites_on_every_shard(stack, pages=10)
            operator = source.client("operator")
            # A host that refuses connections: its page fails for good (a dead letter).
            operator.lpush(
                K.start_urls, *(s.url for s in sites), f"http://127.0.0.1:{free_port()}/"
            )
            operator.sadd(K.dupefilter, "ab" * 20)
            operator.close()
            assert "Moved the crawl" in scrapy(
                "operator", "crawlmove", "--from", source.url("operator")
            )
            w = worker("w", url("worker"), tmp_path, IDLE, env=env)
            writer = db_writer("dbw", url("db_writer"), f"sqlite:///{db_path}", tmp_path, env=env)
            procs += [w, writer]
            crawled_once([w], writer, cluster.client, db_path, sites, timeout=120)
        exporter = Exporter(url("monitor"), tmp_path, "REDIS_CLUSTER=true")
        try:
            metrics = exporter.scrape()
            assert metrics.value("crawler_redis_up") == 1, exporter.log()
            assert (
                metrics.value("crawler_db_writer_items_written_total", spider="distributed") == 30
            )
        finally:
            exporter.close()
        assert "Requeued 1 dead letters" in scrapy("operator", "deadletters", "requeue", "--all")
        assert "Moved 3 fingerprints" in scrapy("operator", "dupefilter", "migrate")
        assert "distributed" in scrapy("monitor", "crawlstatus", "--once")
        # Each shard's seen-set is on a master of its own: every master was used.
        owners = {cluster.master_of(s.frontier_prefix).port for s in CK.all_shards}
        assert len(owners) == 3
        for shard in CK.all_shards:
            assert cluster.master_of(shard.frontier_prefix).client.get(shard.seen)
        assert denials(node.client for node in cluster.nodes) == []
        assert source.denials() == []
        # The start check asks every master: one that lacks a right refuses a worker.
        other = next(n for n in cluster.masters() if n.port != cluster.master_of(CK.prefix).port)
        refused_at_start("worker", url("worker"), other.client, tmp_path, procs, env)
        # ... and a db_writer refuses when that master does not let it reach the
        # item buffers of the shards there (a file made before they existed).
        db_writer_user = role_named("db_writer").user
        other.client.execute_command("ACL", "SETUSER", db_writer_user, "resetkeys", "%RW~{x}:*")
        db = f"sqlite:///{tmp_path / 'refused.db'}"
        refused = db_writer("dbw-refused", url("db_writer"), db, tmp_path, env=env)
        procs.append(refused)
        assert refused.wait(60) == 1, refused.log()[-3000:]
        (line,) = [line for line in refused.log().splitlines() if "may not run" in line]
        assert "on key {distributed/" in line and "Traceback" not in refused.log(), line
        # The cookie jars, cookies:{distributed}:* here: the worker's, never the monitor's.
        home = cluster.master_of(CK.prefix).port
        jar = cookie_jar(CK, "default")
        as_worker = redis.Redis.from_url(role_url("worker", home))
        as_monitor = redis.Redis.from_url(role_url("monitor", home))
        try:
            as_worker.hset(jar, "~v", 1)
            assert as_worker.hgetall(jar) == {b"~v": b"1"}
            with pytest.raises(redis.exceptions.NoPermissionError):
                as_monitor.hgetall(jar)
        finally:
            as_worker.close()
            as_monitor.close()
    finally:
        source.close()


@pytest.fixture
def acl_sentinels(tmp_path) -> Iterator[SentinelGroup]:
    acl = write_acl_file(tmp_path / "acl", acl_text("distributed", servers=True))
    group = SentinelGroup(
        replicas=1,
        server_options=("--aclfile", str(acl), *REPLICATION, *SERVER_OPTIONS),
        login=ADMIN,
        auth=(SENTINEL.user, PASSWORDS[SENTINEL.name]),
    )
    yield group
    group.stop()


def test_a_crawl_through_sentinel_with_a_replica_each_as_its_user(acl_sentinels, tmp_path, procs):
    """The replica replicates as crawler-replica, the sentinels watch (and fail
    over) as crawler-sentinel, the worker and the db_writer find the master
    through them and log in as their users."""
    sentinels = acl_sentinels
    env = {"REDIS_SENTINELS": sentinels.setting, "REDIS_SENTINEL_MASTER": sentinels.name}
    master, (replica,) = sentinels.master, sentinels.replicas
    db_path = tmp_path / "items.db"
    with TestSite(pages=30, seed=7) as site:
        operator = redis.Redis.from_url(role_url("operator", master.port))
        operator.lpush(K.start_urls, site.url)
        operator.close()
        # REDIS_URL gives the user and the db; the sentinels say where the master is.
        w = worker("w", role_url("worker", 9), tmp_path, IDLE, env=env)
        dbw_url = role_url("db_writer", 9)
        writer = db_writer("dbw", dbw_url, f"sqlite:///{db_path}", tmp_path, env=env)
        procs += [w, writer]
        assert w.wait(120) == 0, w.log()[-3000:]
        wait_until(lambda: items_drained(master.client), 60, what="the item buffer to drain")
        assert writer.stop(30) == 0, writer.log()[-3000:]
    assert set(stored_urls(db_path)) == site.page_urls()
    status = scrapy_command(role_url("monitor", 9), "crawlstatus", "--once", env=env)
    assert status.returncode == 0, status.stderr
    # The replica has what the crawl wrote, by replication as crawler-replica.
    assert replica.client.info("replication")["master_link_status"] == "up"
    wait_until(lambda: replica.client.get(K.seen) == master.client.get(K.seen), 10, what="sync")
    # A failover as crawler-sentinel: SLAVEOF NO ONE, CONFIG REWRITE, CLIENT KILL.
    sentinels.failover()
    wait_until(
        lambda: sentinels.master_address()[1] == replica.port, 30, what="the sentinels' new master"
    )
    assert replica.client.info("replication")["role"] == "master"
    assert denials([master.client, replica.client]) == []
    # The start check asks the master the sentinels name now: the old replica.
    refused_at_start("worker", role_url("worker", 9), replica.client, tmp_path, procs, env)
