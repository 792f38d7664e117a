"""Start the project's own processes (workers, db_writer) for tests and the demo.

Each process logs to a file, so a failing test can show what it said.
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import redis
from port_for import get_port

from spiders_project.keys import RedisKeys

ROOT = Path(__file__).resolve().parents[2]
PYTHON = sys.executable
# The keys of the spider ``worker()`` runs.
K = RedisKeys("distributed")


def free_port() -> int:
    """A free TCP port on 127.0.0.1 (port-for, as pytest-redis uses)."""
    return int(get_port(None))


class Proc:
    """A child process with its log file."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str], log_path: Path) -> None:
        self.name = name
        self.log_path = log_path
        self._log = open(log_path, "ab")
        self.popen = subprocess.Popen(
            argv,
            cwd=ROOT,
            env={**os.environ, **env},
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )

    @property
    def pid(self) -> int:
        return self.popen.pid

    def poll(self) -> int | None:
        return self.popen.poll()

    def wait(self, timeout: float) -> int:
        return self.popen.wait(timeout)

    def signal(self, sig: int) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(sig)

    def stop(self, timeout: float = 30) -> int:
        """SIGTERM, then SIGKILL if it does not exit within ``timeout``."""
        self.signal(signal.SIGTERM)
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            return self.popen.wait()

    def log(self) -> str:
        self._log.flush()
        return self.log_path.read_text(errors="replace")

    def close(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()
            self.popen.wait()
        self._log.close()


def worker(
    name: str, redis_url: str, log_dir: Path, *settings: str, env: dict | None = None
) -> Proc:
    """``scrapy crawl distributed`` with ``-s NAME=VALUE`` for each of ``settings``."""
    argv = [PYTHON, "-m", "scrapy", "crawl", "distributed"]
    for s in settings:
        argv += ["-s", s]
    return Proc(name, argv, {"REDIS_URL": redis_url, **(env or {})}, log_dir / f"{name}.log")


def published_stats(r: redis.Redis, proc: Proc) -> dict[str, str]:
    """The Scrapy stats ``proc`` (a worker) published to Redis, as its monitor reads them.

    A worker publishes them every STATS_PUBLISH_INTERVAL and a last time when
    its spider closes, so after it exits these are its final stats. Tests read
    them here instead of parsing the "Dumping Scrapy stats" block of its log.
    """
    raw = r.hgetall(K.worker_stats(f"{socket.gethostname()}:{proc.pid}"))
    return {k.decode(): v.decode() for k, v in raw.items()}


def stat(r: redis.Redis, proc: Proc, name: str) -> int:
    """One counter of ``published_stats`` (0 when the worker never counted it)."""
    return int(published_stats(r, proc).get(name, 0))


def db_writer(
    name: str, redis_url: str, db_url: str, log_dir: Path, *args: str, env: dict | None = None
) -> Proc:
    argv = [PYTHON, "-m", "spiders_project.db_writer", *args]
    return Proc(
        name,
        argv,
        {"REDIS_URL": redis_url, "DB_URL": db_url, **(env or {})},
        log_dir / f"{name}.log",
    )


def wait_until(predicate, timeout: float, interval: float = 0.1, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def stored_urls(db_path: Path) -> list[str]:
    """URLs in the db_writer's SQLite table; empty until it has created it."""
    if not db_path.exists():
        return []
    with sqlite3.connect(db_path) as db:
        try:
            return [row[0] for row in db.execute("SELECT url FROM items")]
        except sqlite3.OperationalError:  # the db_writer has not created it yet
            return []


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
