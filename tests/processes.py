"""Start the project's own processes (workers, db_writer) for tests and the demo.

Each process logs to a file, so a failing test can show what it said.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable


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
