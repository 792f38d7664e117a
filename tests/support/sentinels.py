"""Redis Sentinel for tests: a master, its replicas and three real sentinels.

Plain by default; with a PKI, every server and sentinel speaks TLS only
(replication and the sentinels' own links too), and with passwords the
master, its replicas and the sentinels each require theirs, as a deployment
that follows docs/SECURITY.md would.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import redis
from mirakuru import TCPExecutor

from tests.support.services import RedisServer, free_port
from tests.support.tls import Pki


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
    replicas' (``--aclfile``, ``--masteruser``), ``login`` the user the group's
    clients log in as, and ``auth`` the sentinels' user and password on the
    servers (``sentinel auth-user``/``auth-pass``).
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
    ) -> None:
        self.name = name
        self.tls, self.sentinel_password, self.auth = tls, sentinel_password, auth
        secured: dict[str, Any] = {"tls": tls, "password": password, "login": login}
        # Replicas reach their master over TLS, and so does an old master demoted.
        extra: tuple[str, ...] = ("--tls-replication", "yes") if tls is not None else ()
        extra += server_options
        self.master = RedisServer(*extra, **secured)
        self.replicas = [
            RedisServer("--replicaof", "127.0.0.1", str(self.master.port), *extra, **secured)
            for _ in range(replicas)
        ]
        self.sentinels: list[TCPExecutor] = []
        self.dir = Path(tempfile.mkdtemp(prefix="sentinels-"))
        self.ports: list[int] = []
        try:
            for i in range(3):
                port = free_port()
                conf = self.dir / f"sentinel-{i}.conf"
                conf.write_text(self._conf(i, port, password))
                executor = TCPExecutor(
                    ["redis-server", str(conf), "--sentinel"],
                    host="127.0.0.1",
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
        lines = [f"bind 127.0.0.1\ndir {self.dir}\nlogfile {self.dir}/sentinel-{i}.log"]
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
            f"sentinel monitor {self.name} 127.0.0.1 {self.master.port} 2",
            f"sentinel down-after-milliseconds {self.name} 1000",
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
        return ",".join(f"127.0.0.1:{p}" for p in self.ports)

    def sentinel(self, port: int) -> redis.Redis:
        """A client of the sentinel on ``port`` (TLS and password as they need)."""
        kwargs: dict[str, Any] = {"socket_timeout": 2, "decode_responses": True}
        if self.tls is not None:
            kwargs.update(ssl=True, ssl_ca_certs=str(self.tls.ca))
        return redis.Redis(port=port, password=self.sentinel_password, **kwargs)

    def master_address(self) -> tuple[str, int]:
        """The master as the first sentinel answering names it."""
        for port in self.ports:
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
