"""Start the project's own processes (workers, db_writer) for tests and the benchmarks.

Each process logs to a file, so a failing test can show what it said.
"""

from __future__ import annotations

import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import psutil
import redis

from spiders_project.keys import RedisKeys

ROOT = Path(__file__).resolve().parents[2]
PYTHON = sys.executable
# The keys of the spider ``worker()`` runs.
K = RedisKeys("distributed")
# Settings every test worker starts with, before the test's own (which win):
# a retry's backoff of 0.2 s, not 2 (politeness/retries.py), so the flaky and
# failing pages of test sites cost tenths of a second, not the seconds a real
# site is given. Tests of the backoff itself set their own.
TEST_WORKER_SETTINGS = ("RETRY_BACKOFF_BASE=0.2",)


class Proc:
    """A child process with its log file: the one process wrapper of tests and benchmarks.

    ``cpus`` pins it (the benchmark keeps crawlers and services on separate
    cores); ``stdout=subprocess.PIPE`` (with ``stdin``) lets a parent talk to
    it, and the log then holds its stderr. ``env`` is added to this process'
    environment, or is the whole of it with ``inherit_env=False``. ``new_session``
    puts it in a session of its own (supervisord: a terminal's Ctrl-C reaches
    the test, not the programs).
    """

    def __init__(
        self,
        name: str,
        argv: list[str],
        env: dict[str, str],
        log_path: Path,
        *,
        cwd: Path = ROOT,
        inherit_env: bool = True,
        new_session: bool = False,
        cpus: Iterable[int] | None = None,
        stdin: Any = subprocess.DEVNULL,
        stdout: Any = None,
    ) -> None:
        self.name = name
        self.log_path = log_path
        self._log = open(log_path, "ab")
        cpu_set = set(cpus) if cpus is not None else None

        def on_cpus() -> None:
            if cpu_set is not None:
                os.sched_setaffinity(0, cpu_set)

        self.popen = subprocess.Popen(
            argv,
            cwd=cwd,
            env={**os.environ, **env} if inherit_env else env,
            stdout=stdout if stdout is not None else self._log,
            stderr=self._log if stdout is not None else subprocess.STDOUT,
            stdin=stdin,
            preexec_fn=on_cpus if cpu_set is not None else None,
            start_new_session=new_session,
        )
        self.ps = psutil.Process(self.popen.pid)

    @property
    def pid(self) -> int:
        return self.popen.pid

    def poll(self) -> int | None:
        return self.popen.poll()

    def alive(self) -> bool:
        return self.popen.poll() is None

    def cpu(self) -> float:
        """User + system CPU seconds so far (0 once it has been reaped)."""
        try:
            times = self.ps.cpu_times()
        except psutil.Error:
            return 0.0
        return float(times.user + times.system)

    def rss(self) -> int:
        try:
            return int(self.ps.memory_info().rss)
        except psutil.Error:
            return 0

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


def scrapy_command(
    redis_url: str, *argv: str, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """``scrapy <argv>`` (a command: crawlstatus, deadletters, ...) against ``redis_url``,
    its output captured."""
    return subprocess.run(
        [PYTHON, "-m", "scrapy", *argv],
        cwd=ROOT,
        env={**os.environ, "REDIS_URL": redis_url, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def worker(
    name: str,
    redis_url: str,
    log_dir: Path,
    *settings: str,
    env: dict | None = None,
    spider: str = "distributed",
    prefix: Sequence[str] = (),
) -> Proc:
    """``scrapy crawl <spider>`` with ``-s NAME=VALUE`` for each of ``settings``;
    ``prefix`` goes before the command (``ip netns exec <ns>``: tests/support/netns.py)."""
    argv = [*prefix, PYTHON, "-m", "scrapy", "crawl", spider]
    for s in (*TEST_WORKER_SETTINGS, *settings):
        argv += ["-s", s]
    return Proc(name, argv, {"REDIS_URL": redis_url, **(env or {})}, log_dir / f"{name}.log")


def published_stats(r: redis.Redis, proc: Proc, keys: RedisKeys = K) -> dict[str, str]:
    """The Scrapy stats ``proc`` (a worker) published to Redis, as its monitor reads them.

    A worker publishes them every STATS_PUBLISH_INTERVAL and a last time when
    its spider closes, so after it exits these are its final stats. Tests read
    them here instead of parsing the "Dumping Scrapy stats" block of its log.
    """
    raw = r.hgetall(keys.worker_stats(f"{socket.gethostname()}:{proc.pid}"))
    return {k.decode(): v.decode() for k, v in raw.items()}


def stat(r: redis.Redis, proc: Proc, name: str, keys: RedisKeys = K) -> int:
    """One counter of ``published_stats`` (0 when the worker never counted it)."""
    return int(published_stats(r, proc, keys).get(name, 0))


def db_writer(
    name: str,
    redis_url: str,
    db_url: str,
    log_dir: Path,
    *args: str,
    env: dict | None = None,
    prefix: Sequence[str] = (),
) -> Proc:
    """``python -m spiders_project.db_writer <args>``, ``prefix`` before it (as ``worker``)."""
    argv = [*prefix, PYTHON, "-m", "spiders_project.db_writer", *args]
    return Proc(
        name,
        argv,
        {"REDIS_URL": redis_url, "DB_URL": db_url, **(env or {})},
        log_dir / f"{name}.log",
    )


def items_drained(r: redis.Redis, keys: RedisKeys = K) -> bool:
    """Whether the db_writers have taken and committed every buffered item."""
    return r.llen(keys.items) == 0 and items_in_hand(r, keys) == 0


def items_in_hand(r: redis.Redis, keys: RedisKeys = K) -> int:
    """Entries db_writers took and have not acknowledged: every processing list (each
    writer's, and the previous release's one), found by their names, not by the
    writers' hash the db_writer keeps (a test may scan)."""
    pattern = keys.prefix + "items:processing*"
    return sum(r.llen(key) for key in r.scan_iter(match=pattern, count=1000))


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
