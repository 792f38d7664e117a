"""Sentinel's two kinds of connections (redis_sentinel.py): each gets what it needs, in full.

redis-py copies nothing from the master's options to the sentinels' or back
(redis/redis-py#1002), so these check what each side receives, and that the
clients redis-py builds from them are SSL connections with our options.
"""

from __future__ import annotations

import asyncio
import logging
import time

import pytest
import redis.asyncio.sentinel
import redis.sentinel

from spiders_project.config import ConfigError, load_settings
from spiders_project.redis_access import sentinel as redis_sentinel
from spiders_project.redis_access.connection import (
    RedisConfig,
    _sentinel_kwargs,
    async_client,
    sync_client,
)
from tests.support.processes import wait_until
from tests.support.sentinels import SentinelGroup

TLS_URL = "rediss://:m4ster@localhost:9/3?ssl_ca_certs=ca.crt&ssl_certfile=c.crt&ssl_keyfile=c.key"
SENTINELS = "127.0.0.1:26379,127.0.0.1:26380"


@pytest.fixture(autouse=True)
def certificate_files(tmp_path, monkeypatch):
    """The files the URLs name (a process refuses a certificate file that is missing)."""
    monkeypatch.chdir(tmp_path)
    for name in ("ca.crt", "c.crt", "c.key", "other.crt"):
        (tmp_path / name).write_text("")


def config(**overrides: str) -> RedisConfig:
    return RedisConfig.from_settings(load_settings({"REDIS_SENTINELS": SENTINELS, **overrides}))


def test_plain_sentinels_get_only_timeouts_and_the_master_its_db_and_password():
    sentinels, master = _sentinel_kwargs(config(REDIS_URL="redis://:pw@h:1/2"))
    assert sentinels == {"socket_timeout": 10.0, "socket_connect_timeout": 10.0, "retry": None}
    assert master["db"] == 2 and master["password"] == "pw" and "ssl" not in master


def test_a_rediss_url_gives_tls_to_the_master_and_to_the_sentinels():
    redis_config = config(REDIS_URL=TLS_URL, REDIS_SENTINEL_PASSWORD="s3ntinel")
    sentinels, master = _sentinel_kwargs(redis_config)
    tls = {"ssl_ca_certs": "ca.crt", "ssl_certfile": "c.crt", "ssl_keyfile": "c.key"}
    assert master["ssl"] is True and master.items() >= tls.items()
    assert master["password"] == "m4ster" and master["db"] == 3
    assert "connection_class" not in master  # it would drop the sentinel lookup
    assert sentinels["ssl"] is True and sentinels.items() >= tls.items()
    assert sentinels["password"] == "s3ntinel" and "username" not in sentinels
    assert redis_config.where.endswith(" over TLS")


def test_the_sentinels_tls_can_be_forced_and_its_options_overridden():
    redis_config = config(
        REDIS_URL=TLS_URL,
        REDIS_SENTINEL_TLS="TRUE",
        REDIS_SENTINEL_USERNAME="watcher",
        REDIS_SENTINEL_SSL_OPTIONS="ssl_ca_certs=other.crt&ssl_check_hostname=false",
    )
    sentinels, master = _sentinel_kwargs(redis_config)
    assert sentinels["ssl_ca_certs"] == "other.crt" and sentinels["ssl_check_hostname"] is False
    assert sentinels["ssl_certfile"] == "c.crt" and sentinels["username"] == "watcher"
    assert master["ssl_ca_certs"] == "ca.crt" and "ssl_check_hostname" not in master
    plain = _sentinel_kwargs(config(REDIS_URL=TLS_URL, REDIS_SENTINEL_TLS="false"))[0]
    assert "ssl" not in plain and "ssl_ca_certs" not in plain
    forced = _sentinel_kwargs(config(REDIS_URL="redis://h:1/0", REDIS_SENTINEL_TLS="true"))[0]
    assert forced["ssl"] is True


def test_the_clients_redis_py_builds_are_ssl_with_our_options():
    sentinels, master = _sentinel_kwargs(config(REDIS_URL=TLS_URL, REDIS_SENTINEL_PASSWORD="x"))
    blocking = redis.sentinel.Sentinel([("127.0.0.1", 1)], sentinel_kwargs=sentinels)
    client = blocking.master_for("mymaster", **master)
    pool = client.connection_pool
    assert pool.connection_class is redis.sentinel.SentinelManagedSSLConnection
    assert pool.connection_kwargs["ssl_ca_certs"] == "ca.crt"
    own = blocking.sentinels[0].connection_pool
    assert own.connection_class is redis.SSLConnection
    assert own.connection_kwargs["password"] == "x"
    aio = redis.asyncio.sentinel.Sentinel([("127.0.0.1", 1)], sentinel_kwargs=sentinels)
    apool = aio.master_for("mymaster", **master).connection_pool
    assert apool.connection_class is redis.asyncio.sentinel.SentinelManagedSSLConnection
    assert aio.sentinels[0].connection_pool.connection_kwargs["ssl_certfile"] == "c.crt"


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        ({"REDIS_SENTINEL_TLS": "maybe"}, "REDIS_SENTINEL_TLS"),
        (
            {"REDIS_SENTINEL_SSL_OPTIONS": "ssl_password=hunter2&ssl_cert_reqs=maybe"},
            "REDIS_SENTINEL_SSL_OPTIONS",
        ),
        (
            {"REDIS_SENTINEL_SSL_OPTIONS": "ssl_password=hunter2&ssl_ca_certs=gone.crt"},
            "REDIS_SENTINEL_SSL_OPTIONS",
        ),
        (
            {"REDIS_SENTINEL_SSL_OPTIONS": "ssl_password=hunter2&host=x"},
            "REDIS_SENTINEL_SSL_OPTIONS",
        ),
        (
            {"REDIS_SENTINEL_SSL_OPTIONS": "ssl_password=hunter2&garbage"},
            "REDIS_SENTINEL_SSL_OPTIONS",
        ),
        (
            {"REDIS_SENTINEL_SSL_OPTIONS": "ssl_password=hunter2&ssl_min_version=x"},
            "REDIS_SENTINEL_SSL_OPTIONS",
        ),
    ],
)
def test_a_bad_sentinel_setting_is_named_and_no_password_shown(overrides, named):
    with pytest.raises(ConfigError, match=f"^{named}=") as refused:
        config(**overrides)
    assert "hunter2" not in str(refused.value) and "\n" not in str(refused.value)


def test_sentinels_unverified_by_their_own_options_warn_once(caplog):
    caplog.set_level(logging.WARNING)
    redis_sentinel._warned.clear()
    redis_config = config(
        REDIS_URL=TLS_URL, REDIS_SENTINEL_SSL_OPTIONS="ssl_cert_reqs=none&ssl_password=hunter2"
    )
    _sentinel_kwargs(redis_config)
    _sentinel_kwargs(redis_config)
    lines = [
        r.getMessage() for r in caplog.records if "REDIS_SENTINEL_SSL_OPTIONS" in r.getMessage()
    ]
    assert len(lines) == 1 and "ssl_cert_reqs=none" in lines[0] and "hunter2" not in lines[0]
    redis_sentinel._warned.clear()
    caplog.clear()
    _sentinel_kwargs(config(REDIS_URL=TLS_URL))
    assert not [r for r in caplog.records if "REDIS_SENTINEL_SSL_OPTIONS" in r.getMessage()]


def test_the_sentinel_password_is_never_in_the_config_repr():
    assert "s3cret" not in repr(config(REDIS_SENTINEL_PASSWORD="s3cret"))


@pytest.fixture
def sentinels():
    group = SentinelGroup(replicas=1)
    yield group
    group.stop()


@pytest.mark.redis
def test_clients_leave_a_replaced_master_before_it_is_demoted(sentinels):
    """After SENTINEL FAILOVER the old master stays a writable master with no
    replica for about 10 s; redis-py alone stays on it until then (its writes
    are lost when it resyncs). Ours follow the sentinels within about 2 s."""
    settings = load_settings(
        {"REDIS_SENTINELS": sentinels.setting, "REDIS_URL": "redis://127.0.0.1:9/0"}
    )
    asyncio.run(_follow(sentinels, settings))


async def _follow(sentinels: SentinelGroup, settings) -> None:
    blocking = sync_client(settings)
    aio = async_client(settings, "distributed")
    old = sentinels.master_address()
    assert int(blocking.info("server")["tcp_port"]) == old[1]
    assert int((await aio.info("server"))["tcp_port"]) == old[1]
    sentinels.failover()
    wait_until(lambda: sentinels.master_address() != old, 10, what="a replica promoted")
    new = sentinels.master_address()
    deadline = time.monotonic() + 5
    while int(blocking.info("server")["tcp_port"]) != new[1]:
        assert time.monotonic() < deadline, "the blocking client stayed on the old master"
        time.sleep(0.1)
    while int((await aio.info("server"))["tcp_port"]) != new[1]:
        assert time.monotonic() < deadline, "the asyncio client stayed on the old master"
        await asyncio.sleep(0.1)
    # The old master is still a master the sentinels no longer name: what a
    # client wrote there now would be lost.
    assert sentinels.server(old).client.info("replication")["role"] == "master"
    blocking.close()
    await aio.aclose()
