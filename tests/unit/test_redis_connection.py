"""The Redis connection's typed config (redis_connection.py): defaults read, bad values named;
TLS parameters checked, verification turned off warned about, a refused certificate named."""

from __future__ import annotations

import logging

import pytest

from spiders_project.config import ConfigError, load_settings
from spiders_project.redis_access import connection as redis_connection
from spiders_project.redis_access.connection import RedisConfig, ping_or_message
from tests.support.services import RedisServer


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        ({"REDIS_URL": "nonsense"}, "REDIS_URL"),
        ({"REDIS_SOCKET_TIMEOUT": "0"}, "REDIS_SOCKET_TIMEOUT"),
        ({"REDIS_SENTINELS": "h1:26379,h2"}, "REDIS_SENTINELS"),
        ({"REDIS_SENTINELS": "h1:99999"}, "REDIS_SENTINELS"),
        ({"REDIS_WAIT_REPLICAS": "-1"}, "REDIS_WAIT_REPLICAS"),
        ({"REDIS_WAIT_TIMEOUT": "0"}, "REDIS_WAIT_TIMEOUT"),
    ],
)
def test_a_bad_value_is_refused_with_the_setting_named(overrides, named):
    with pytest.raises(ConfigError, match=f"^{named}="):
        RedisConfig.from_settings(load_settings(overrides))


def test_sentinels_arrive_typed():
    settings = load_settings(
        {
            "REDIS_SENTINELS": "10.0.0.1:26379, [::1]:26380",
            "REDIS_WAIT_REPLICAS": "2",
        }
    )
    redis_config = RedisConfig.from_settings(settings)
    assert redis_config.sentinels == (("10.0.0.1", 26379), ("::1", 26380))
    assert redis_config.wait_replicas == 2 and redis_config.sentinel_master == "mymaster"
    assert "sentinels 10.0.0.1:26379,::1:26380" in redis_config.where


def test_a_password_in_a_bad_redis_url_is_never_shown():
    with pytest.raises(ConfigError) as refused:
        RedisConfig.from_settings(load_settings({"REDIS_URL": "redis://:s3cret@host:port/0"}))
    assert "s3cret" not in str(refused.value) and str(refused.value).startswith("REDIS_URL=")


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("redis://h:6379/0?ssl_ca_certs=/etc/hostname", "need a rediss:// URL"),
        ("rediss://h:6379/0?ssl_cert_reqs=maybe", "ssl_cert_reqs=maybe: not one of"),
        ("rediss://:s3cret@h:6379/0?ssl_ca_certs=/nonexistent/ca.crt", "no such file"),
        ("rediss://h:6379/0?ssl_certfile=/nonexistent/c.crt", "ssl_certfile=/nonexistent"),
    ],
)
def test_bad_tls_parameters_are_refused_before_any_connection(url, problem):
    with pytest.raises(ConfigError, match="^REDIS_URL=") as refused:
        RedisConfig.from_settings(load_settings({"REDIS_URL": url}))
    assert problem in str(refused.value) and "s3cret" not in str(refused.value)


def test_a_cluster_is_reached_over_tcp():
    with pytest.raises(ConfigError, match="^REDIS_CLUSTER=.*redis:// or rediss://"):
        RedisConfig.from_settings(
            load_settings({"REDIS_URL": "unix:///tmp/redis.sock", "REDIS_CLUSTER": "true"})
        )


@pytest.mark.parametrize(
    ("query", "named"),
    [("ssl_cert_reqs=none", "ssl_cert_reqs=none"), ("ssl_check_hostname=false", "hostname")],
)
def test_verification_turned_off_warns_once_per_process(query, named, caplog, monkeypatch):
    monkeypatch.setattr(redis_connection, "_warned", set())
    settings = load_settings({"REDIS_URL": f"rediss://:pw@h:6379/0?{query}"})
    with caplog.at_level(logging.WARNING, logger=redis_connection.__name__):
        for _ in range(3):  # the clients a worker builds: none connects here
            redis_connection.sync_client(settings).close()
            redis_connection.async_client(settings, "{distributed}")
    [warning] = caplog.records
    assert warning.levelno == logging.WARNING
    assert named in warning.getMessage() and "pose as Redis" in warning.getMessage()
    assert ":pw@" not in warning.getMessage()
    caplog.clear()
    verified = load_settings({"REDIS_URL": "rediss://h:6379/0"})
    with caplog.at_level(logging.WARNING, logger=redis_connection.__name__):
        redis_connection.sync_client(verified).close()
    assert caplog.records == []


@pytest.fixture
def tls_servers(pki):
    """A TLS-only redis-server with our server certificate, one with the
    wrong-name one, one that asks for client certificates."""
    wrong = ("--tls-cert-file", str(pki.wrong_name_cert), "--tls-key-file", str(pki.wrong_name_key))
    servers = [
        RedisServer(tls=pki),
        RedisServer(*wrong, tls=pki),
        RedisServer(tls=pki, tls_clients="yes"),
    ]
    yield servers
    for server in servers:
        server.stop()


@pytest.mark.redis
def test_a_certificate_refused_at_start_is_named_in_one_line(tls_servers, pki):
    good, wrong_name, mutual = tls_servers

    def message(url: str) -> str | None:
        return ping_or_message(load_settings({"REDIS_URL": url}))

    assert message(good.url) is None
    assert message(mutual.url) is None  # with our client certificate
    other_ca = message(pki.url(good.port, ca=pki.other_ca))
    mismatch = message(wrong_name.url)
    no_client_cert = message(pki.url(mutual.port))
    for line in (other_ca, mismatch, no_client_cert):
        assert line is not None and "\n" not in line
        assert line.startswith("cannot connect to Redis at rediss://localhost:")
    assert other_ca is not None and "TLS certificate problem" in other_ca
    assert "self-signed certificate in certificate chain" in other_ca
    assert mismatch is not None and "TLS certificate problem" in mismatch
    assert "Hostname mismatch" in mismatch
    assert no_client_cert is not None and "ssl_certfile and ssl_keyfile" in no_client_cert
