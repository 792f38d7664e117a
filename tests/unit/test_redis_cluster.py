"""The pinned client of a Redis Cluster (redis_cluster.py), plain and over TLS,
against a real one-node cluster that owns every slot."""

from __future__ import annotations

import asyncio

import pytest
import redis
import redis.asyncio

from spiders_project.redis_access.cluster import (
    PinnedConnection,
    PinnedSSLConnection,
    pinned_async_client,
)
from tests.support.processes import wait_until
from tests.support.services import RedisServer

KWARGS = {"socket_timeout": 5, "socket_connect_timeout": 5, "retry": None}


@pytest.fixture
def tls_node(pki):
    """A TLS-only redis-server in cluster mode, owning slots 0-16383
    (``--tls-cluster``: CLUSTER SLOTS names its TLS port)."""
    cluster = ("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf")
    node = RedisServer(*cluster, "--tls-cluster", "yes", tls=pki)
    node.client.execute_command("CLUSTER", "ADDSLOTSRANGE", 0, 16383)
    wait_until(lambda: node.client.cluster("info")["cluster_state"] == "ok", 10, what="slots")
    yield node
    node.stop()


def test_a_rediss_url_pins_an_ssl_connection_with_the_urls_options(pki):
    client = pinned_async_client(pki.url(7000, client=True), "{s}", KWARGS)
    pool = client.connection_pool
    assert pool.connection_class is PinnedSSLConnection
    assert issubclass(PinnedSSLConnection, redis.asyncio.SSLConnection)
    assert pool.connection_kwargs["ssl_ca_certs"] == str(pki.ca)
    assert pool.connection_kwargs["ssl_certfile"] == str(pki.client_cert)
    owner = pool.connection_kwargs["slot_owner"]
    assert owner._connection_class is redis.asyncio.SSLConnection
    assert owner._kwargs["ssl_keyfile"] == str(pki.client_key)
    plain = pinned_async_client("redis://127.0.0.1:7000/0", "{s}", KWARGS)
    assert plain.connection_pool.connection_class is PinnedConnection


async def _set_get(url: str) -> bytes | None:
    client = pinned_async_client(url, "{s}", KWARGS)
    try:
        await client.set("{s}k", "v")
        async with client.pipeline(transaction=True) as pipe:
            pipe.incr("{s}n").get("{s}k")
            _, value = await pipe.execute()
        return value  # type: ignore[no-any-return]
    finally:
        await client.aclose()


@pytest.mark.redis
def test_the_pinned_client_speaks_tls_and_verifies_the_certificate(tls_node, pki):
    assert asyncio.run(_set_get(tls_node.url)) == b"v"
    assert tls_node.client.get("{s}n") == b"1"
    # The slot's owner asked over TLS too: a client that trusts another CA
    # is refused at that question, naming the certificate.
    with pytest.raises(redis.ConnectionError, match="CERTIFICATE_VERIFY_FAILED"):
        asyncio.run(_set_get(pki.url(tls_node.port, ca=pki.other_ca)))
