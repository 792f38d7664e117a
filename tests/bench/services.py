"""Processes of the benchmark: a private redis-server, the site, a temporary PostgreSQL,
and the crawlers, each optionally pinned to a set of CPUs and measured with psutil.

Nothing here touches a server the benchmark did not start.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import psutil
import redis

from tests.support.processes import find_pg_ctl

ROOT = Path(__file__).resolve().parents[2]
PYTHON = sys.executable


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


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


class Child:
    """A child process with its log file, started on ``cpus`` (None: anywhere)."""

    def __init__(
        self,
        name: str,
        argv: list[str],
        log_dir: Path,
        *,
        env: dict[str, str] | None = None,
        cpus: Iterable[int] | None = None,
        stdin: Any = subprocess.DEVNULL,
        stdout: Any = None,
    ) -> None:
        self.name = name
        self.log_path = log_dir / f"{name}.log"
        self._log = open(self.log_path, "wb")
        cpu_set = set(cpus) if cpus is not None else None

        def preexec() -> None:
            if cpu_set is not None:
                os.sched_setaffinity(0, cpu_set)

        self.popen = subprocess.Popen(
            argv,
            cwd=ROOT,
            env={**os.environ, **(env or {})},
            stdin=stdin,
            stdout=stdout if stdout is not None else self._log,
            stderr=self._log if stdout is not None else subprocess.STDOUT,
            preexec_fn=preexec,
        )
        self.ps = psutil.Process(self.popen.pid)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def cpu(self) -> float:
        """User + system CPU seconds so far (0 once it has exited)."""
        try:
            times = self.ps.cpu_times()
        except psutil.Error:
            return 0.0
        return times.user + times.system

    def rss(self) -> int:
        try:
            return self.ps.memory_info().rss
        except psutil.Error:
            return 0

    def terminate(self) -> None:
        if self.alive():
            self.popen.send_signal(signal.SIGTERM)

    def wait(self, timeout: float) -> int:
        """Wait for exit; SIGKILL after ``timeout``. Returns the exit status."""
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            return self.popen.wait()

    def log(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text(errors="replace")

    def close(self) -> None:
        if self.alive():
            self.popen.kill()
            self.popen.wait()
        self._log.close()


class RedisServer:
    """A private redis-server on a free port: no persistence, loopback only."""

    def __init__(self, log_dir: Path, cpus: Iterable[int] | None) -> None:
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="bench_redis_"))
        argv = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1"]
        argv += ["--save", "", "--appendonly", "no", "--dir", str(self.dir)]
        self.proc = Child("redis", argv, log_dir, cpus=cpus)
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.client = redis.Redis.from_url(self.url)
        deadline = time.monotonic() + 30
        while True:
            try:
                self.client.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline or not self.proc.alive():
                    raise RuntimeError(f"redis-server did not start: {self.proc.log()}") from None
                time.sleep(0.05)

    def reset(self) -> None:
        """Empty it and zero its counters, before each crawl."""
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
        self.proc.terminate()
        self.proc.wait(10)
        self.proc.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class Site:
    """``tests.bench.site_proc`` as a child process, asked over its stdin."""

    def __init__(self, pages: int, log_dir: Path, cpus: Iterable[int] | None) -> None:
        argv = [PYTHON, "-m", "tests.bench.site_proc", "--pages", str(pages)]
        self.pages = pages
        self.proc = Child(
            "site", argv, log_dir, cpus=cpus, stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        line = self._read()
        if not line.startswith("ready "):
            raise RuntimeError(f"site did not start: {line!r} {self.proc.log()}")
        self.port = int(line.split()[1])
        self.url = f"http://127.0.0.1:{self.port}/"

    def _read(self) -> str:
        assert self.proc.popen.stdout is not None
        return self.proc.popen.stdout.readline().decode().strip()

    def ask(self, command: str) -> str:
        assert self.proc.popen.stdin is not None
        self.proc.popen.stdin.write(f"{command}\n".encode())
        self.proc.popen.stdin.flush()
        return self._read()

    def count(self) -> int:
        return int(self.ask("count"))

    def page_times(self) -> list[float]:
        return json.loads(self.ask("times"))

    def reset(self) -> None:
        self.ask("reset")

    def stop(self) -> None:
        if self.proc.popen.stdin is not None:
            self.proc.popen.stdin.close()
        self.proc.wait(10)
        self.proc.close()


class Postgres:
    """A temporary PostgreSQL cluster on a free port, as tests/integration starts one.

    PostgreSQL refuses to run as root: as root, pg_ctl runs through
    ``runuser -u postgres`` and the data lives in a directory that user owns.
    """

    def __init__(self, dbname: str = "bench") -> None:
        from pytest_postgresql.executors import PostgreSQLExecutor

        pg_ctl = find_pg_ctl()
        if pg_ctl is None:
            raise RuntimeError("pg_ctl not found (make setup installs PostgreSQL)")
        self.base = Path(tempfile.mkdtemp(prefix="bench_pg_"))
        executable = pg_ctl
        if os.geteuid() == 0:
            shutil.chown(self.base, "postgres")
            executable = str(self.base / "pg_ctl")
            Path(executable).write_text(f'#!/bin/sh\nexec runuser -u postgres -- "{pg_ctl}" "$@"\n')
            os.chmod(executable, 0o755)
        self.port = free_port()
        self.executor = PostgreSQLExecutor(
            executable=executable,
            host="127.0.0.1",
            port=self.port,
            datadir=str(self.base / "data"),
            unixsocketdir=str(self.base),
            logfile=str(self.base / "postgresql.log"),
            startparams="-w",
            dbname=dbname,
            user="postgres",
        )
        self.executor.start()
        try:
            self._create(dbname)
        except BaseException:
            self.stop()
            raise
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/{dbname}"

    def _create(self, dbname: str) -> None:
        """CREATE DATABASE, once the server accepts connections (not just listens)."""
        import psycopg

        deadline = time.monotonic() + 60
        while True:
            try:
                with psycopg.connect(
                    f"postgresql://postgres@127.0.0.1:{self.port}/postgres", autocommit=True
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
