"""The servers tests and benchmarks start for themselves: redis-server and PostgreSQL.

One starter each, shared by the fixtures (tests/conftest.py, the PostgreSQL
fixtures of tests/integration) and the benchmark (tests/bench), so that a
benchmark measures the crawler against the same servers the tests trust.
Each listens on a free port of 127.0.0.1, keeps its data in a directory of
its own, and is stopped by whoever started it: nothing here touches a
server that may already run on the machine (6379, 5432).
"""

from __future__ import annotations

import glob
import os
import shlex
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import psutil
import redis
import redis.cluster
from mirakuru import TCPExecutor
from port_for import get_port
from redis.crc import key_slot

from tests.support.tls import Pki


def free_port() -> int:
    """A free TCP port on 127.0.0.1 (port-for, as pytest-redis uses)."""
    return int(get_port(None))


def pin(pid: int, cpus: Iterable[int] | None) -> None:
    """Pin every thread of ``pid`` to ``cpus`` (None: every CPU)."""
    wanted = set(cpus) if cpus is not None else set(range(os.cpu_count() or 1))
    try:
        tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except FileNotFoundError:
        return
    for tid in tids:
        try:
            os.sched_setaffinity(tid, wanted)
        except (ProcessLookupError, PermissionError):
            pass


class RedisServer:
    """A private redis-server (mirakuru): free port, loopback only, no persistence by default.

    ``options`` come after the defaults, so ``RedisServer("--appendonly", "yes")``
    wins over them. ``executor`` is mirakuru's, for tests that stop and start
    the same server (its data directory survives a restart). ``cpus`` pins it,
    for the benchmark. ``tls``: TLS only, with that PKI's server certificate
    (``tls_clients``: ``--tls-auth-clients``); ``url`` is then a ``rediss://``
    URL that verifies it (with our client certificate unless ``tls_clients``
    is "no"), and ``client`` speaks TLS. ``host`` (the address it binds) and
    ``prefix`` (before its command) run it in a host of tests/support/netns.py
    (``ip netns exec <ns>``). ``password``: ``requirepass`` and ``masterauth``;
    ``url`` (and ``client``) then carry it. ``login``: an ACL user and its
    password that ``url`` and ``client`` log in as (the options declare it:
    ``--aclfile``).
    """

    def __init__(
        self,
        *options: str,
        datadir: Path | None = None,
        cpus: Iterable[int] | None = None,
        tls: Pki | None = None,
        tls_clients: str = "no",
        host: str = "127.0.0.1",
        prefix: Sequence[str] = (),
        password: str | None = None,
        login: tuple[str, str] | None = None,
    ) -> None:
        self.port = free_port()
        if tls is not None:
            # After --port N: "--port 0" turns plain TCP off, TLS takes the port.
            options = (*tls.redis_server_options(self.port, clients=tls_clients), *options)
        self._own_dir = datadir is None
        self.dir = datadir or Path(tempfile.mkdtemp(prefix="redis-"))
        self.dir.mkdir(parents=True, exist_ok=True)
        if password is not None:
            options = ("--requirepass", password, "--masterauth", password, *options)
        self.executor = TCPExecutor(
            [*prefix, "redis-server", "--port", str(self.port), "--bind", host]
            + ["--dir", str(self.dir), "--logfile", str(self.dir / "redis.log")]
            # No protected mode: off loopback it refuses clients (DENIED) without a password.
            + ["--save", "", "--appendonly", "no", "--protected-mode", "no", *options],
            host=host,
            port=self.port,
            timeout=30,
        )
        self.executor.start()
        self.url = f"redis://{host}:{self.port}/0"
        if tls is not None:
            self.url = tls.url(self.port, client=tls_clients != "no")
        if password is not None:
            scheme, _, rest = self.url.partition("://")
            self.url = f"{scheme}://:{password}@{rest}"
        if login is not None:
            scheme, _, rest = self.url.partition("://")
            self.url = f"{scheme}://{login[0]}:{login[1]}@{rest}"
        self.client = redis.Redis.from_url(self.url)
        self._cpus = cpus
        if cpus is not None:
            pin(self.pid, cpus)

    @property
    def pid(self) -> int:
        process = self.executor.process
        assert process is not None, "redis-server is not running"
        return int(process.pid)

    def cpu(self) -> float:
        """User + system CPU seconds of the server so far."""
        try:
            times = psutil.Process(self.pid).cpu_times()
        except (psutil.Error, AssertionError):
            return 0.0
        return float(times.user + times.system)

    def reset(self) -> None:
        """Empty it and zero its counters (between benchmark crawls)."""
        self.client.flushall()
        self.client.config_resetstat()

    def sample(self) -> dict[str, Any]:
        """Commands executed (by name), CPU seconds and used memory, now."""
        info = self.client.info("all")
        calls = {
            name[len("cmdstat_") :]: int(value["calls"])
            for name, value in info.items()
            if name.startswith("cmdstat_")
        }
        return {
            "calls": calls,
            "cpu": float(info["used_cpu_sys"]) + float(info["used_cpu_user"]),
            "memory": int(info["used_memory"]),
        }

    def stop(self) -> None:
        self.client.close()
        if self.executor.running():
            self.executor.stop()
        if self._own_dir:
            shutil.rmtree(self.dir, ignore_errors=True)


def find_pg_ctl() -> str | None:
    """The newest pg_ctl installed (Debian keeps them under /usr/lib/postgresql/N/bin)."""

    def version(path: str) -> float:
        try:
            return float(Path(path).parts[-3])
        except ValueError:
            return 0.0

    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=version, reverse=True)
    candidates += ["/usr/local/bin/pg_ctl", shutil.which("pg_ctl") or ""]
    for candidate in candidates:
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


class PostgresServer:
    """A temporary PostgreSQL cluster on a free port, run by pytest-postgresql's executor.

    Not the ``postgresql_proc`` factory itself: PostgreSQL refuses to run as
    root, and the factory keeps its data under pytest's 0700 temp directory,
    which the ``postgres`` user cannot enter. As root, pg_ctl is called
    through ``runuser -u postgres`` and the data lives in a directory that
    user owns. ``dbname`` is created once the server accepts connections.
    ``host`` and ``prefix`` as for RedisServer; off loopback it trusts its subnet.
    ``tls``: ``ssl=on`` with that PKI's server certificate (copied where the
    server's user can read it; the key must be its own, mode 0600).
    """

    def __init__(
        self,
        dbname: str,
        host: str = "127.0.0.1",
        prefix: Sequence[str] = (),
        *,
        tls: Pki | None = None,
    ) -> None:
        from pytest_postgresql.executors import PostgreSQLExecutor

        pg_ctl = find_pg_ctl()
        if pg_ctl is None:
            raise RuntimeError("pg_ctl not found (make setup installs PostgreSQL)")
        self.base = Path(tempfile.mkdtemp(prefix="pg-"))
        executable = pg_ctl
        if os.geteuid() == 0:
            shutil.chown(self.base, "postgres")
            prefix = [*prefix, "runuser", "-u", "postgres", "--"]
        if prefix:
            executable = str(self.base / "pg_ctl")
            command = " ".join(shlex.quote(arg) for arg in [*prefix, pg_ctl])
            Path(executable).write_text(f'#!/bin/sh\nexec {command} "$@"\n')
            os.chmod(executable, 0o755)
        hba = self.base / "pg_hba.conf"
        hba.write_text("local all all trust\nhost all all samenet trust\n")
        options = "" if host == "127.0.0.1" else f"-c listen_addresses={host} -c hba_file={hba}"
        self.host, self.port, self.dbname = host, free_port(), dbname
        if tls is not None:
            options = f"{options} {self._tls_options(tls)}".strip()
        self.executor = PostgreSQLExecutor(
            executable=executable,
            host=self.host,
            port=self.port,
            datadir=str(self.base / "data"),
            unixsocketdir=str(self.base),
            logfile=str(self.base / "postgresql.log"),
            startparams="-w",
            dbname=dbname,
            user="postgres",
            postgres_options=options,
        )
        self.executor.start()
        try:
            self.create_database(dbname)
        except BaseException:
            self.stop()
            raise
        self.url = f"postgresql://postgres@{self.host}:{self.port}/{dbname}"

    def _tls_options(self, tls: Pki) -> str:
        """postgres options for TLS (``ssl=on``), with copies of the server's cert and key."""
        cert, key = self.base / "server.crt", self.base / "server.key"
        shutil.copyfile(tls.server_cert, cert)
        shutil.copyfile(tls.server_key, key)
        key.chmod(0o600)
        if os.geteuid() == 0:
            for path in (cert, key):
                shutil.chown(path, "postgres")
        return f"-c ssl=on -c ssl_cert_file={cert} -c ssl_key_file={key}"

    def create_database(self, dbname: str, timeout: float = 60) -> None:
        """CREATE DATABASE, once the server accepts connections (not just listens)."""
        import psycopg

        deadline = time.monotonic() + timeout
        while True:
            try:
                with psycopg.connect(
                    f"postgresql://postgres@{self.host}:{self.port}/postgres", autocommit=True
                ) as conn:
                    conn.execute(f'CREATE DATABASE "{dbname}"')
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    def stop(self) -> None:
        try:
            if self.executor.running():
                self.executor.stop()
        finally:
            shutil.rmtree(self.base, ignore_errors=True)


class RedisClusterGroup:
    """A real Redis Cluster: ``masters`` redis-servers with ``--cluster-enabled yes``,
    each with ``replicas`` replicas, joined by ``redis-cli --cluster create``.

    Every node is a :class:`RedisServer` (free port, own directory); ``url``
    names the first master, as ``REDIS_URL`` would; ``client`` is redis-py's
    cluster client. A replica takes over a master one second after it stops
    answering (``cluster-node-timeout 1000``). ``tls``: every node speaks TLS
    only, to clients, on the cluster bus and to its master
    (``--tls-cluster``, ``--tls-replication``); a node connecting to another
    shows our client certificate (the bus always asks for one, and the
    server's is for serverAuth only). ``options`` are every node's too (an
    ``--aclfile``), and ``login`` the ACL user the group logs in as.
    """

    def __init__(
        self,
        masters: int = 3,
        replicas: int = 0,
        tls: Pki | None = None,
        options: Sequence[str] = (),
        login: tuple[str, str] | None = None,
    ) -> None:
        options = [*options, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"]
        options += ["--cluster-node-timeout", "1000"]
        cli = [] if login is None else ["--user", login[0], "--pass", login[1]]
        if tls is not None:
            options += ["--tls-cluster", "yes", "--tls-replication", "yes"]
            options += ["--tls-client-cert-file", str(tls.client_cert)]
            options += ["--tls-client-key-file", str(tls.client_key)]
            cli += ["--tls", "--cacert", str(tls.ca)]
        self.nodes: list[RedisServer] = []
        try:
            for _ in range(masters * (1 + replicas)):
                # The cluster bus on a free port of its own: by default it is
                # the node's port + 10000, which may be taken, or past 65535.
                bus = ["--cluster-port", str(free_port())]
                self.nodes.append(RedisServer(*options, *bus, tls=tls, login=login))
            created = subprocess.run(
                ["redis-cli", *cli, "--cluster", "create"]
                + [f"127.0.0.1:{node.port}" for node in self.nodes]
                + ["--cluster-replicas", str(replicas), "--cluster-yes"],
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert created.returncode == 0, created.stdout[-2000:] + created.stderr[-2000:]
            self.url = self.nodes[0].url
            self._wait_until_ok()
            self.client = redis.cluster.RedisCluster.from_url(self.url)
        except BaseException:
            self.stop()
            raise

    def _wait_until_ok(self, timeout: float = 60) -> None:
        """Until every node says the cluster is ok and knows its replicas."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            infos = [node.client.cluster("info") for node in self.nodes]
            synced = all(
                node.client.info("replication").get("master_link_status", "up") == "up"
                for node in self.nodes
            )
            if synced and all(info.get("cluster_state") == "ok" for info in infos):
                return
            time.sleep(0.2)
        raise AssertionError("the cluster did not come up in time")

    def masters(self) -> list[RedisServer]:
        """The nodes that are masters now (a replica promoted after a failover counts)."""
        found = []
        for node in self.nodes:
            try:
                if node.client.info("replication").get("role") == "master":
                    found.append(node)
            except (redis.RedisError, OSError):
                continue
        return found

    def owner(self, key: str) -> RedisServer | None:
        """The live master that says it owns ``key``'s slot now, if any (a failover
        leaves the slot without one until a replica is promoted)."""
        slot = key_slot(key.encode())
        for node in self.masters():
            for start, end, master, *_ in node.client.execute_command("CLUSTER", "SLOTS"):
                if start <= slot <= end and int(master[1]) == node.port:
                    return node
        return None

    def master_of(self, key: str) -> RedisServer:
        """The master that owns ``key``'s slot now."""
        node = self.owner(key)
        assert node is not None, f"no master owns slot {key_slot(key.encode())}"
        return node

    def stop(self) -> None:
        if hasattr(self, "client"):
            self.client.close()
        for node in self.nodes:
            try:
                node.stop()
            except Exception:  # noqa: BLE001 - a node a test killed
                pass
