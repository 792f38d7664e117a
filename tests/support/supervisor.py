"""supervisord for tests: one instance with a given config, queried over its API, then stopped.

Tests of the production supervisor config (``deploy/supervisor/crawler.conf``)
run it under a real supervisord. This wrapper is the tests' own, kept apart
from the demo's runner so that a change to what ``make demo`` does never
changes what a test checks, and so that a test can kill what it started on
any failure (every program runs in a process group of its own).
"""

from __future__ import annotations

import configparser
import contextlib
import os
import signal
import subprocess
import sys
import time
import xmlrpc.client
from pathlib import Path
from typing import Any

from supervisor.xmlrpc import SupervisorTransport

from tests.support.processes import ROOT, Proc

BIN = Path(sys.executable).parent


class Supervisord:
    """``supervisord -n -c <run_dir>/supervisord.conf``, started by ``start()``."""

    def __init__(self, run_dir: Path, config: str) -> None:
        self.run_dir = run_dir
        self.conf_path = run_dir / "supervisord.conf"
        self.conf_path.write_text(config)
        parser = configparser.RawConfigParser(interpolation=None)
        parser.read_string(config)
        self.serverurl = parser.get("supervisorctl", "serverurl")
        self._proc: Proc | None = None
        self._pids: set[int] = set()

    def rpc(self) -> Any:
        """supervisord's XML-RPC API over its Unix socket."""
        transport = SupervisorTransport(None, None, self.serverurl)
        return xmlrpc.client.ServerProxy("http://127.0.0.1", transport=transport)

    def start(self, timeout: float = 20.0) -> None:
        """Start supervisord; returns once it says RUNNING."""
        (self.run_dir / "logs").mkdir(exist_ok=True)
        argv = [str(BIN / "supervisord"), "-n", "-c", str(self.conf_path)]
        out = self.run_dir / "supervisord.out"
        self._proc = Proc("supervisord", argv, {}, out, new_session=True)
        deadline = time.monotonic() + timeout
        while True:
            assert self._proc.alive(), self._proc.log()
            with contextlib.suppress(OSError, xmlrpc.client.Error):
                if self.rpc().supervisor.getState()["statename"] == "RUNNING":
                    return
            assert time.monotonic() < deadline, "supervisord did not come up"
            time.sleep(0.1)

    def processes(self) -> list[dict[str, Any]]:
        """supervisord's view of every program process (name, statename, pid, ...)."""
        infos: list[dict[str, Any]] = self.rpc().supervisor.getAllProcessInfo()
        self._pids.update(info["pid"] for info in infos if info["pid"])
        return infos

    def states(self) -> dict[str, tuple[str, int]]:
        """Program name -> (state name, pid)."""
        return {p["name"]: (p["statename"], p["pid"]) for p in self.processes()}

    def ctl(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """``supervisorctl -c <conf> <args>``."""
        return subprocess.run(
            [str(BIN / "supervisorctl"), "-c", str(self.conf_path), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=ROOT,
        )

    def stop(self) -> None:
        """``stop all`` (graceful, in priority order), ``shutdown``; then kill what is left."""
        if self._proc is None:
            return
        popen = self._proc.popen
        try:
            if popen.poll() is None:
                with contextlib.suppress(OSError, xmlrpc.client.Error):
                    self.processes()
                self.ctl("stop", "all")
                self.ctl("shutdown", timeout=30)
                popen.wait(60)
        finally:
            if popen.poll() is None:
                popen.kill()
                popen.wait()
            for pid in self._pids:  # each program runs in its own process group
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pid, signal.SIGKILL)
            self._proc.close()
