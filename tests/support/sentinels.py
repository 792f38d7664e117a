"""Redis Sentinel for tests: a master, its replicas and three real sentinels.

Plain by default; with a PKI, every server and sentinel speaks TLS only
(replication and the sentinels' own links too), and with passwords the
master, its replicas and the sentinels each require theirs, as a deployment
that follows docs/SECURITY.md would. On a network namespace test bed
(tests/support/netns.py) each server and sentinel runs in a host of its own
(``servers``, ``sentinel_hosts``: a :class:`Place` each).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis
from mirakuru import TCPExecutor

from tests.support.services import RedisServer, free_port
from tests.support.tls import Pki


@dataclass(frozen=True)
class Place:
    """Where a server or sentinel runs: the address it binds, and what goes before
    its command (``bed.prefix(host)``: ``ip netns exec <ns>``)."""

    address: str = "127.0.0.1"
    prefix: tuple[str, ...] = ()


class SentinelGroup:
    """A master, its replicas and three ``redis-sentinel`` processes, all real.

    The sentinels (``redis-server <conf> --sentinel``, quorum 2) watch the
    master as ``name`` and fail over to a replica one second after it stops
    answering. ``master`` and ``replicas`` are :class:`RedisServer`; a test
    SIGKILLs the master (or calls :meth:`failover`) and reads
    ``master_address()`` to see the promotion.

    ``tls``: TLS only everywhere, with that PKI's server certificate.
    ``password``: the master's and replicas' ``requirepass`` (the sentinels
    get it as ``sentinel auth-pass``); ``sentinel_password``: the sentinels'
    own ``requirepass`` (and ``sentinel sentinel-pass``, for each other).
    ACL users (docs/SECURITY.md): ``server_options`` are the master's and the
    replicas' (``--aclfile``, ``--masteruser``; ``--min-replicas-to-write 1``),
    ``login`` the user the group's clients log in as, and ``auth`` the
    sentinels' user and password on the servers (``sentinel auth-user``/``auth-pass``).
    ``servers``: the master's place, then each replica's (``replicas`` is then
    their number); ``sentinel_hosts``: the three sentinels'; ``down_after_ms``
    is the sentinels' ``down-after-milliseconds``.
    """

    def __init__(
        self,
        replicas: int = 1,
        name: str = "mymaster",
        *,
        tls: Pki | None = None,
        password: str | None = None,
        sentinel_password: str | None = None,
        server_options: tuple[str, ...] = (),
        login: tuple[str, str] | None = None,
        auth: tuple[str, str] | None = None,
        servers: Sequence[Place] = (),
        sentinel_hosts: Sequence[Place] = (),
        down_after_ms: int = 1000,
    ) -> None:
        self.name = name
        self.tls, self.sentinel_password, self.auth = tls, sentinel_password, auth
        self.down_after_ms = down_after_ms
        places = list(servers) or [Place()] * (replicas + 1)
        self.places = list(sentinel_hosts) or [Place()] * 3
        secured: dict[str, Any] = {"tls": tls, "password": password, "login": login}
        # Replicas reach their master over TLS, and so does an old master demoted.
        extra: tuple[str, ...] = ("--tls-replication", "yes") if tls is not None else ()
        extra += server_options
        at = [{"host": p.address, "prefix": p.prefix} for p in places]
        self.master = RedisServer(*extra, **secured, **at[0])
        self.master_host = places[0].address
        self.replicas = [
            RedisServer(
                "--replicaof",
                self.master_host,
                str(self.master.port),
                *extra,
                **secured,
                **where,
            )
            for where in at[1:]
        ]
        self.sentinels: list[TCPExecutor] = []
        self.dir = Path(tempfile.mkdtemp(prefix="sentinels-"))
        self.ports: list[int] = []
        try:
            for i, place in enumerate(self.places):
                port = free_port()
                conf = self.dir / f"sentinel-{i}.conf"
                conf.write_text(self._conf(i, port, password))
                executor = TCPExecutor(
                    [*place.prefix, "redis-server", str(conf), "--sentinel"],
                    host=place.address,
                    port=port,
                    timeout=30,
                )
                executor.start()
                self.sentinels.append(executor)
                self.ports.append(port)
            self._wait_until_watched()
        except BaseException:
            self.stop()
            raise

    def _conf(self, i: int, port: int, password: str | None) -> str:
        lines = [
            f"bind {self.places[i].address}\ndir {self.dir}\nlogfile {self.dir}/sentinel-{i}.log",
            "protected-mode no",
        ]
        if self.tls is None:
            lines.append(f"port {port}")
        else:
            # Sentinels speak TLS to clients, to each other and to the servers.
            options = self.tls.redis_server_options(port)
            pairs = zip(options[::2], options[1::2], strict=True)
            lines += [f"{name.lstrip('-')} {value}" for name, value in pairs]
            lines.append("tls-replication yes")
        if self.sentinel_password is not None:
            lines.append(f"requirepass {self.sentinel_password}")
            lines.append(f"sentinel sentinel-pass {self.sentinel_password}")
        lines += [
            f"sentinel monitor {self.name} {self.master_host} {self.master.port} 2",
            f"sentinel down-after-milliseconds {self.name} {self.down_after_ms}",
            f"sentinel failover-timeout {self.name} 10000",
        ]
        if password is not None:
            lines.append(f"sentinel auth-pass {self.name} {password}")
        if self.auth is not None:
            lines.append(f"sentinel auth-user {self.name} {self.auth[0]}")
            lines.append(f"sentinel auth-pass {self.name} {self.auth[1]}")
        return "\n".join(lines) + "\n"

    @property
    def setting(self) -> str:
        """``REDIS_SENTINELS`` for these sentinels."""
        pairs = zip(self.places, self.ports, strict=True)
        return ",".join(f"{place.address}:{port}" for place, port in pairs)

    def sentinel(self, port: int) -> redis.Redis:
        """A client of the sentinel on ``port`` (TLS and password as they need)."""
        kwargs: dict[str, Any] = {"socket_timeout": 2, "decode_responses": True}
        if self.tls is not None:
            kwargs.update(ssl=True, ssl_ca_certs=str(self.tls.ca))
        host = self.places[self.ports.index(port)].address
        return redis.Redis(host=host, port=port, password=self.sentinel_password, **kwargs)

    def master_address(self, among: Sequence[int] = ()) -> tuple[str, int]:
        """The master as the first sentinel answering names it (of ``among``,
        ports of some sentinels, if given: those on one side of a partition)."""
        for port in among or self.ports:
            try:
                client = self.sentinel(port)
                host, master_port = client.sentinel_get_master_addr_by_name(self.name)
                client.close()
                return host, int(master_port)
            except (redis.RedisError, OSError, TypeError):
                continue
        raise AssertionError("no sentinel answers")

    def server(self, address: tuple[str, int]) -> RedisServer:
        """The master or replica listening at ``address``."""
        for server in (self.master, *self.replicas):
            if server.port == address[1]:
                return server
        raise AssertionError(f"no server of this group at {address}")

    def failover(self) -> None:
        """SENTINEL FAILOVER: a replica is promoted, the master demoted (nothing killed)."""
        client = self.sentinel(self.ports[0])
        try:
            client.sentinel_failover(self.name)
        finally:
            client.close()

    def _wait_until_watched(self, timeout: float = 30) -> None:
        """Until the replicas are in sync and every sentinel knows them and the others."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            synced = all(
                r.client.info("replication").get("master_link_status") == "up"
                for r in self.replicas
            )
            known = True
            for port in self.ports:
                client = self.sentinel(port)
                try:
                    known &= len(client.sentinel_slaves(self.name)) == len(self.replicas)
                    known &= len(client.sentinel_sentinels(self.name)) == len(self.ports) - 1
                finally:
                    client.close()
            if synced and known:
                return
            time.sleep(0.2)
        raise AssertionError("the sentinels did not see the replicas and each other in time")

    def stop(self) -> None:
        for executor in self.sentinels:
            if executor.running():
                executor.stop()
        for server in [self.master, *self.replicas]:
            try:
                server.stop()
            except Exception:  # noqa: BLE001 - a server a test killed
                pass
        shutil.rmtree(self.dir, ignore_errors=True)
