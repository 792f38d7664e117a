"""The Redis users of ``scrapy redis-acl``, on a real redis-server started with the file.

Each role does its whole job as its own user (seeding and the commands as the
operator, a worker, the db_writer, the monitor), and Redis' ACL LOG shows no
refusal meanwhile; each role is refused the commands no role may run; the
monitor cannot write; a worker cannot touch another spider's keys; a process
whose user lacks a command refuses to start with one line.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import redis

from spiders_project.cookies.store import LUA_DIR
from spiders_project.keys import RedisKeys
from spiders_project.keys.cookies import cookie_counts, cookie_jar, cookie_jars
from spiders_project.redis_access import load_lua
from spiders_project.redis_access.acl import ROLES, SENTINEL, SERVER_ROLES
from spiders_project.redis_access.acl_commands import FORBIDDEN
from tests.support.acl_users import AclRedis, acl_text
from tests.support.monitoring import Exporter
from tests.support.processes import (
    PYTHON,
    K,
    db_writer,
    items_drained,
    scrapy_command,
    stored_urls,
    wait_until,
    worker,
)
from tests.support.site import TestSite


@pytest.fixture
def acl_redis(tmp_path) -> Iterator[AclRedis]:
    server = AclRedis(tmp_path / "redis", acl_text("distributed"))
    yield server
    server.close()


def test_the_file_turns_the_default_user_off(acl_redis):
    with pytest.raises(redis.AuthenticationError):
        redis.Redis(port=acl_redis.port, retry=None).ping()
    with pytest.raises(redis.AuthenticationError):
        redis.Redis(
            port=acl_redis.port, username="crawler-worker", password="wrong", retry=None
        ).ping()


@pytest.mark.slow
def test_each_role_does_its_whole_job_as_its_own_user(acl_redis, tmp_path, procs):
    admin = acl_redis.admin
    db_path = tmp_path / "items.db"
    with TestSite(pages=40, seed=5, dead_links=False, offsite_links=False) as site:
        operator = acl_redis.client("operator")
        operator.lpush(K.start_urls, site.url)
        operator.close()
        w = worker("w", acl_redis.url("worker"), tmp_path, "MAX_IDLE_TIME_BEFORE_CLOSE=2")
        writer = db_writer("dbw", acl_redis.url("db_writer"), f"sqlite:///{db_path}", tmp_path)
        procs += [w, writer]
        assert w.wait(120) == 0, w.log()[-3000:]
        wait_until(lambda: items_drained(admin), 60, what="the item buffer to drain")
        assert writer.stop(30) == 0, writer.log()[-3000:]
    assert set(stored_urls(db_path)) == site.page_urls()

    exporter = Exporter(acl_redis.url("monitor"), tmp_path)
    try:
        metrics = exporter.scrape()
        monitor_log = exporter.log()
        assert metrics.value("crawler_redis_up") == 1, monitor_log
        assert metrics.value("crawler_db_writer_items_written_total", spider="distributed") == 40
    finally:
        exporter.close()
    for argv in (("crawlstatus", "--once"), ("deadletters", "list")):
        done = scrapy_command(acl_redis.url("operator"), *argv)
        assert done.returncode == 0, (argv, done.stderr)
    # crawlstatus reads only what the monitor reads: its user is enough.
    done = scrapy_command(acl_redis.url("monitor"), "crawlstatus", "--once")
    assert done.returncode == 0, done.stderr
    # Not one command or key was refused to anyone, scripts' own calls included.
    assert acl_redis.denials() == []
    for log in (w.log(), writer.log(), monitor_log):
        assert "may not run" not in log and "Traceback" not in log


def _forbidden_call(client: redis.Redis, name: str) -> None:
    args = {
        "flushall": ("FLUSHALL",),
        "flushdb": ("FLUSHDB",),
        "config": ("CONFIG", "GET", "maxmemory"),
        "debug": ("DEBUG", "SLEEP", "0"),
        "shutdown": ("SHUTDOWN", "NOSAVE"),
        "acl": ("ACL", "WHOAMI"),
        "keys": ("KEYS", "*"),
        "monitor": ("MONITOR",),
    }[name]
    client.execute_command(*args)


@pytest.mark.parametrize("role", [r.name for r in ROLES])
@pytest.mark.parametrize("command", FORBIDDEN)
def test_no_role_may_run_the_dangerous_commands(acl_redis, role, command):
    client = acl_redis.client(role)
    try:
        with pytest.raises(redis.exceptions.NoPermissionError):
            _forbidden_call(client, command)
    finally:
        client.close()
    assert acl_redis.admin.ping()  # still up: SHUTDOWN was refused


@pytest.mark.parametrize("role", [r.name for r in SERVER_ROLES])
def test_the_replicas_and_sentinels_users_touch_no_key_and_no_dangerous_command(tmp_path, role):
    server = AclRedis(tmp_path / "redis", acl_text("distributed", servers=True))
    client = server.client(role)
    try:
        assert client.ping()
        for command in FORBIDDEN:
            with pytest.raises(redis.exceptions.NoPermissionError):
                _forbidden_call(client, command)
        for command in (("GET", K.seen), ("SET", K.seen, "1"), ("EVAL", "return 1", 0)):
            with pytest.raises(redis.exceptions.NoPermissionError):
                client.execute_command(*command)
        # Of CONFIG, the sentinels' user has REWRITE only (a failover rewrites the
        # promoted server's file); this server has none, and says so.
        if role == SENTINEL.name:
            with pytest.raises(redis.ResponseError, match="without a config file"):
                client.execute_command("CONFIG", "REWRITE")
        assert server.admin.ping() and server.denials()
    finally:
        client.close()
        server.close()


def test_the_monitor_cannot_write(acl_redis):
    monitor = acl_redis.client("monitor")
    writes = [
        ("SET", K.requests_size, "1"),
        ("LPUSH", K.start_urls, "x"),
        ("DEL", K.items),
        ("HSET", K.stats_totals, "f", "1"),
        ("EVAL", "return 1", 1, K.seen),
        ("SADD", "spiders", "x"),
    ]
    for command in writes:
        with pytest.raises(redis.exceptions.NoPermissionError):
            monitor.execute_command(*command)
    assert monitor.llen(K.start_urls) == 0  # but it reads
    monitor.close()
    assert acl_redis.admin.dbsize() == 0


def test_a_worker_cannot_touch_another_spiders_keys(acl_redis):
    other = "other:requests:size"
    w = acl_redis.client("worker")
    for command in (("SET", other, "1"), ("GET", other), ("LPUSH", "other:start_urls", "x")):
        with pytest.raises(redis.exceptions.NoPermissionError):
            w.execute_command(*command)
    # A script's keys are checked too, the declared ones and those it computes.
    with pytest.raises(redis.exceptions.NoPermissionError):
        w.eval("return redis.call('SET', KEYS[1], 1)", 1, other)
    with pytest.raises(redis.ResponseError, match="can't access at least one of the keys"):
        w.eval("return redis.call('SET', 'other:seen', 1)", 1, K.seen)
    # The spiders set: SADD only (its own name or another: a key pattern cannot tell).
    assert w.sadd("spiders", "distributed") == 1
    for command in (
        ("SREM", "spiders", "distributed"),
        ("SMEMBERS", "spiders"),
        ("DEL", "spiders"),
    ):
        with pytest.raises(redis.exceptions.NoPermissionError):
            w.execute_command(*command)
    # The db_writer reaches the item buffer and its lock, never the frontier.
    dbw = acl_redis.client("db_writer")
    with pytest.raises(redis.exceptions.NoPermissionError):
        dbw.set(K.requests_size, 1)
    assert dbw.llen(K.items) == 0
    w.close()
    dbw.close()


def test_cookie_jars_are_read_by_the_worker_and_the_operator_never_by_the_monitor(acl_redis):
    jar = cookie_jar(K, "default")
    cookie = {"value": "s3cret", "expires": None, "secure": False, "http_only": True}
    w = acl_redis.client("worker")
    # A jar as the workers keep it (COOKIES.md): a cookie per field, its version, the index.
    w.hset(jar, mapping={"127.0.0.1\t/\tsession": json.dumps(cookie), "~v": 1})
    w.zadd(cookie_jars(K), {"default": 1})
    w.hset(cookie_counts(K), "default", 1)
    assert b"s3cret" in w.hgetall(jar)[b"127.0.0.1\t/\tsession"]
    with pytest.raises(redis.exceptions.NoPermissionError):
        w.hgetall(cookie_jar(RedisKeys("other"), "default"))
    monitor = acl_redis.client("monitor")
    for command in (("HGETALL", jar), ("HGET", jar, "~v"), ("EXISTS", jar)):
        with pytest.raises(redis.exceptions.NoPermissionError):
            monitor.execute_command(*command)
    # What the exporter reads instead: how many jars and cookies, never which.
    assert monitor.zcard(cookie_jars(K)) == 1 and monitor.hlen(cookie_counts(K)) == 1
    assert monitor.hrandfield(cookie_counts(K), 10, withvalues=True) == [b"default", b"1"]
    operator = acl_redis.client("operator")
    assert operator.hscan(jar)[1] and operator.unlink(jar) == 1
    for client in (w, monitor, operator):
        client.close()
    refused = {(entry["username"], entry["object"]) for entry in acl_redis.denials()}
    assert ("crawler-monitor", jar) in refused
    assert not any(
        user in ("crawler-worker", "crawler-operator") and key == jar for user, key in refused
    )


def _lacking(acl_redis, user: str, rule: str) -> None:
    """Take ``rule`` (``-lrem``) from ``user``, live."""
    acl_redis.admin.execute_command("ACL", "SETUSER", user, rule)


@pytest.mark.parametrize(
    ("role", "rule", "named"),
    [
        ("worker", "-lrem", "LREM"),
        ("db_writer", "-blmove", "BLMOVE"),
        ("monitor", "-scard", "SCARD"),
    ],
)
def test_a_process_whose_user_lacks_a_command_refuses_at_start(
    acl_redis, tmp_path, procs, role, rule, named
):
    user = next(r.user for r in ROLES if r.name == role)
    _lacking(acl_redis, user, rule)
    url = acl_redis.url(role)
    if role == "worker":
        proc = worker("w", url, tmp_path)
    elif role == "db_writer":
        proc = db_writer("dbw", url, f"sqlite:///{tmp_path / 'i.db'}", tmp_path)
    else:
        from tests.support.processes import Proc

        argv = [PYTHON, "-m", "monitor", "-s", "MONITOR_PORT=0"]
        proc = Proc("monitor", argv, {"REDIS_URL": url}, tmp_path / "monitor.log")
    procs.append(proc)
    assert proc.wait(60) == 1, proc.log()[-3000:]
    lines = [line for line in proc.log().splitlines() if "may not run" in line]
    assert len(lines) == 1, proc.log()[-3000:]
    assert f"Redis user '{user}'" in lines[0] and named in lines[0], lines[0]
    assert "Traceback" not in proc.log()


def test_a_user_without_a_key_refuses_at_start_naming_it(acl_redis, tmp_path, procs):
    # The worker's user of another spider's file: no key of "distributed".
    acl_redis.admin.execute_command("ACL", "SETUSER", "crawler-worker", "resetkeys", "~other:*")
    proc = worker("w", acl_redis.url("worker"), tmp_path)
    procs.append(proc)
    assert proc.wait(60) == 1, proc.log()[-3000:]
    (line,) = [line for line in proc.log().splitlines() if "may not run" in line]
    assert "on key distributed:" in line


def test_a_user_of_a_file_made_before_the_cookie_jars_refuses_at_start(acl_redis, tmp_path, procs):
    # The file of the previous release: the spider's prefix only, no cookies:distributed:*.
    for user in ("crawler-worker", "crawler-operator"):
        acl_redis.admin.execute_command("ACL", "SETUSER", user, "resetkeys", "~distributed:*")
    proc = worker("w", acl_redis.url("worker"), tmp_path)
    procs.append(proc)
    assert proc.wait(60) == 1, proc.log()[-3000:]
    (line,) = [line for line in proc.log().splitlines() if "may not run" in line]
    assert "on key cookies:distributed:jar:default" in line, line
    done = scrapy_command(acl_redis.url("operator"), "cookies", "list")
    assert done.returncode == 1 and done.stderr.count("\n") == 1, done.stderr
    assert "on key cookies:distributed:jar:default" in done.stderr


def test_a_command_whose_user_lacks_a_command_refuses_in_one_line(acl_redis):
    _lacking(acl_redis, "crawler-operator", "-lrem")
    done = scrapy_command(acl_redis.url("operator"), "deadletters", "list")
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and "LREM" in done.stderr, done.stderr
    # Not the operator's for crawlstatus: its reads are the monitor's.
    done = scrapy_command(acl_redis.url("operator"), "crawlstatus", "--once")
    assert done.returncode == 0, done.stderr


def test_the_cookie_jars_are_the_workers_and_the_operators_and_hidden_from_the_monitor(
    acl_redis,
):
    update = load_lua(LUA_DIR, "update")
    jar = cookie_jar(K, "default")
    w = acl_redis.client("worker")
    keys = [jar, cookie_jars(K), cookie_counts(K)]
    assert w.eval(update.source, 3, *keys, "", "default", 60_000, "", 1, "d\t/\ts", "{}") > 0
    assert w.hget(jar, "d\t/\ts") == b"{}" and w.hgetall(jar)
    # A jar's session: its login and its proxy (session.lua), the worker's too.
    session = load_lua(LUA_DIR, "session")
    args = ("", "default", 60_000, "retire", "", "http://p2:2")
    assert w.eval(session.source, 3, *keys, *args)[0] == b"retired"
    assert w.hget(jar, "~proxy") == b"http://p2:2" and w.hget(jar, "d\t/\ts") is None
    operator = acl_redis.client("operator")
    assert operator.hkeys(jar) and operator.delete(jar) == 1
    monitor = acl_redis.client("monitor")
    for command in (("HGETALL", jar), ("HGET", jar, "~v"), ("EXISTS", jar)):
        with pytest.raises(redis.exceptions.NoPermissionError):
            monitor.execute_command(*command)
    # What the exporter may read: how many cookies, never which.
    assert monitor.hgetall(cookie_counts(K)) == {b"default": b"0"}
    assert {entry["username"] for entry in acl_redis.denials()} == {"crawler-monitor"}
    for client in (w, operator, monitor):
        client.close()
