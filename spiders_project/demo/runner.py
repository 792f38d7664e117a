"""What ``make demo`` sets up and must leave as it found it: Redis and supervisord.

The demo uses a Redis it was given or starts a private one (:class:`PrivateRedis`);
in a server it did not start it claims the ``distributed:*`` keys first.

:class:`Supervisor` runs the production program definitions of
``deploy/supervisor/crawler.conf`` under a real supervisord, from a config
generated in the demo's run directory, so the demo exercises what an operator
deploys. Both classes stop what they started on every path, a second
interrupt included (then with SIGKILL).
"""

from __future__ import annotations

import configparser
import contextlib
import io
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import xmlrpc.client
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import redis
from supervisor.xmlrpc import SupervisorTransport

from spiders_project.config import load_settings
from spiders_project.keys import RedisKeys
from spiders_project.redis_connection import mask_url

ROOT = Path(__file__).resolve().parents[2]
K = RedisKeys("distributed")
PRODUCTION_CONF = ROOT / "deploy" / "supervisor" / "crawler.conf"
# Failed starts before supervisord marks a program FATAL (after 1 + 2 + 3 s of backoff).
DEMO_START_RETRIES = 3
# The longest path a Unix socket may have (108 on Linux, with room to spare).
_MAX_SOCKET_PATH = 100


class DemoError(Exception):
    """A reason the demo cannot go on, already phrased for the user."""

    def __init__(self, message: str, status: int = 1) -> None:
        super().__init__(message)
        self.status = status


def say(message: str) -> None:
    """One line of the demo's own output."""
    print(f"demo: {message}", flush=True)


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def tail(path: Path, lines: int = 20) -> str:
    """The last ``lines`` lines of a log file, or a note that there is none."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return f"    (no log at {path})"
    return "\n".join(f"    {line}" for line in text.splitlines()[-lines:])


@contextlib.contextmanager
def signals_ignored() -> Iterator[None]:
    """Let nothing interrupt a last-resort cleanup (SIGINT and SIGTERM are dropped)."""
    old = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


def _stop_popen(popen: subprocess.Popen[bytes], timeout: float) -> None:
    """SIGTERM, then SIGKILL after ``timeout`` seconds; signals are ignored meanwhile."""
    with signals_ignored():
        if popen.poll() is None:
            popen.terminate()
            try:
                popen.wait(timeout)
            except subprocess.TimeoutExpired:
                popen.kill()
                popen.wait()


class PrivateRedis:
    """A throwaway redis-server on a free port: no persistence, data in a temp dir."""

    def __init__(self, log_path: Path) -> None:
        self.log_path = log_path
        self.port = 0
        self._popen: subprocess.Popen[bytes] | None = None
        self._dir: str | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 10.0) -> str:
        """Start the server and return its URL once it answers PING."""
        binary = shutil.which("redis-server")
        if binary is None:
            raise DemoError(
                "redis-server not found on PATH and nothing answers on localhost:6379: "
                "run `make setup` (it installs redis-server), or set REDIS_URL"
            )
        self._dir = tempfile.mkdtemp(prefix="crawler-demo-redis-")
        self.port = free_port()
        argv = [
            binary,
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            self._dir,
            "--daemonize",
            "no",
            "--logfile",
            str(self.log_path),
        ]
        # Its own session: a Ctrl-C in the terminal reaches the demo only, which
        # stops the workers before their Redis goes away.
        self._popen = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        client = redis.Redis(port=self.port, socket_timeout=1, socket_connect_timeout=1)
        deadline = time.monotonic() + timeout
        try:
            while True:
                if self._popen.poll() is not None:
                    raise DemoError(
                        f"redis-server exited at start (status {self._popen.returncode}):\n"
                        + tail(self.log_path)
                    )
                with contextlib.suppress(redis.ConnectionError, redis.BusyLoadingError):
                    client.ping()
                    return self.url
                if time.monotonic() > deadline:
                    raise DemoError(f"redis-server did not answer within {timeout:.0f} s")
                time.sleep(0.05)
        finally:
            client.close()

    def stop(self) -> None:
        if self._popen is not None:
            _stop_popen(self._popen, 10)
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None


# --- Which Redis ---------------------------------------------------------------------------


def choose_redis(stack: contextlib.ExitStack, run_dir: Path) -> tuple[str, bool]:
    """(REDIS_URL to use, whether the demo started that server itself)."""
    if os.environ.get("REDIS_URL", "") != "":
        return os.environ["REDIS_URL"], False
    default_url = load_settings().get("REDIS_URL")
    probe = redis.Redis.from_url(default_url, socket_timeout=2, socket_connect_timeout=1)
    try:
        probe.ping()
        return default_url, False
    except redis.AuthenticationError as exc:  # a subclass of ConnectionError
        raise DemoError(
            f"a Redis on {mask_url(default_url)} wants a password ({exc}): set REDIS_URL"
        ) from exc
    except (redis.ConnectionError, redis.TimeoutError):
        pass  # nothing (usable) answers there: start a private server
    except redis.RedisError as exc:
        raise DemoError(
            f"something answers on {mask_url(default_url)} but not as a usable Redis ({exc}): "
            "set REDIS_URL, or stop that server to let the demo start its own"
        ) from exc
    finally:
        probe.close()
    server = PrivateRedis(run_dir / "redis.log")
    stack.callback(server.stop)
    return server.start(), True


def crawl_keys(client: redis.Redis) -> list[bytes]:
    """Every key of the spider ``distributed`` (SCAN: fine for a demo, never for work)."""
    return list(client.scan_iter(match=f"{K.spider}:*", count=1000))


def claim_namespace(client: redis.Redis, url: str, reset: bool) -> None:
    """Refuse a server that holds crawl state already, or delete it with --reset."""
    keys = crawl_keys(client)
    if not keys:
        return
    if not reset:
        raise DemoError(
            f"{mask_url(url)} already holds {len(keys)} {K.spider}:* keys (another crawl, or an "
            "earlier demo run with --keep-keys). Rerun with --reset to delete those keys, or "
            "point REDIS_URL at another Redis.",
            status=2,
        )
    delete_keys(client, keys)
    say(f"--reset: deleted {len(keys)} {K.spider}:* keys from {mask_url(url)}")


def delete_keys(client: redis.Redis, keys: list[bytes]) -> None:
    for i in range(0, len(keys), 500):
        client.unlink(*keys[i : i + 500])


def forget_crawl(client: redis.Redis, url: str) -> None:
    """At the end: delete the crawl's keys from a server the demo did not start."""
    try:
        delete_keys(client, crawl_keys(client))
    except redis.RedisError as exc:
        say(f"could not delete the {K.spider}:* keys from {mask_url(url)}: {exc}")


def render_config(
    run_dir: Path,
    *,
    environment: Mapping[str, str],
    with_monitor: bool,
    production: Path = PRODUCTION_CONF,
) -> str:
    """A complete supervisord.conf: own [supervisord] sections plus the production programs.

    ``environment`` becomes ``[supervisord] environment=``: it fills the
    ``%(ENV_x)s`` of the production file and is inherited by every program.
    Without ``with_monitor`` the monitor program is left out (not yet written).
    Programs give up after ``DEMO_START_RETRIES`` failed starts instead of the
    production value, so a broken program fails the demo in seconds.
    """
    prod = configparser.RawConfigParser(interpolation=None, strict=True)
    prod.optionxform = str  # type: ignore[assignment,method-assign]
    if not prod.read(production):
        raise DemoError(f"cannot read {production}")
    if not with_monitor:
        prod.remove_section("program:monitor")
        programs = [p.strip() for p in prod.get("group:crawler", "programs").split(",")]
        prod.set("group:crawler", "programs", ",".join(p for p in programs if p != "monitor"))
    for section in prod.sections():
        if section.startswith("program:"):
            prod.set(section, "startretries", str(DEMO_START_RETRIES))

    socket_path = run_dir / "supervisor.sock"
    if len(str(socket_path)) > _MAX_SOCKET_PATH:
        socket_path = Path(tempfile.mkdtemp(prefix="crawler-demo-")) / "supervisor.sock"
    for value in environment.values():
        if any(c in value for c in "%\"',\n"):
            raise DemoError(f"cannot pass {value!r} to supervisord: unsupported character")
    own = configparser.RawConfigParser(interpolation=None)
    own.optionxform = str  # type: ignore[assignment,method-assign]
    own["unix_http_server"] = {"file": str(socket_path), "chmod": "0700"}
    own["supervisord"] = {
        "identifier": "crawler-demo",
        "logfile": str(run_dir / "supervisord.log"),
        "pidfile": str(run_dir / "supervisord.pid"),
        "childlogdir": str(run_dir / "logs"),
        "nodaemon": "true",
        "silent": "true",
        "environment": ",".join(f'{k}="{v}"' for k, v in environment.items()),
    }
    own["rpcinterface:supervisor"] = {
        "supervisor.rpcinterface_factory": "supervisor.rpcinterface:make_main_rpcinterface",
    }
    own["supervisorctl"] = {"serverurl": f"unix://{socket_path}"}
    out = io.StringIO()
    out.write(
        f"; Generated by python -m spiders_project.demo from {production}.\n"
        "; Operate it with: supervisorctl -c <this file> status\n\n"
    )
    own.write(out)
    prod.write(out)
    return out.getvalue()


class Supervisor:
    """supervisord running the crawler's programs, as a child of the demo.

    It is started with ``-n`` in a session of its own, so the demo holds its
    PID and a terminal's Ctrl-C reaches the demo alone, which then stops the
    programs in order (``supervisorctl stop all``) before shutting it down.
    """

    def __init__(self, run_dir: Path, config: str) -> None:
        self.run_dir = run_dir
        self.conf_path = run_dir / "supervisord.conf"
        self.conf_path.write_text(config)
        parser = configparser.RawConfigParser(interpolation=None)
        parser.read_string(config)
        self.serverurl = parser.get("supervisorctl", "serverurl")
        bindir = Path(sys.executable).parent
        self._supervisord = self._binary(bindir, "supervisord")
        self._supervisorctl = self._binary(bindir, "supervisorctl")
        self._popen: subprocess.Popen[bytes] | None = None
        self._out_path = run_dir / "supervisord.out"
        self._child_pids: set[int] = set()
        self._stopped_cleanly = False

    @staticmethod
    def _binary(bindir: Path, name: str) -> str:
        path = bindir / name
        found = str(path) if path.exists() else shutil.which(name)
        if found is None:
            raise DemoError(f"{name} not found: run `make setup` (it installs supervisor)")
        return found

    def rpc(self) -> Any:
        """An XML-RPC proxy to supervisord's API over its Unix socket."""
        transport = SupervisorTransport(None, None, self.serverurl)
        return xmlrpc.client.ServerProxy("http://127.0.0.1", transport=transport)

    def start(self, timeout: float = 20.0) -> None:
        """Start supervisord and return once it reports RUNNING."""
        self._stop_stale()
        (self.run_dir / "logs").mkdir(exist_ok=True)
        with open(self._out_path, "wb") as out:
            self._popen = subprocess.Popen(
                [self._supervisord, "-n", "-c", str(self.conf_path)],
                cwd=ROOT,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while True:
            if self._popen.poll() is not None:
                raise DemoError(
                    f"supervisord exited at start (status {self._popen.returncode}):\n"
                    + tail(self._out_path)
                    + "\n"
                    + tail(self.run_dir / "supervisord.log")
                )
            with contextlib.suppress(OSError, xmlrpc.client.Error):
                if self.rpc().supervisor.getState()["statename"] == "RUNNING":
                    return
            if time.monotonic() > deadline:
                raise DemoError(f"supervisord did not come up within {timeout:.0f} s")
            time.sleep(0.1)

    def _stop_stale(self) -> None:
        """Shut down a supervisord left running by a demo that was killed (SIGKILL)."""
        try:
            pid = int((self.run_dir / "supervisord.pid").read_text())
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except (OSError, ValueError):
            return
        if str(self.conf_path).encode() not in cmdline:
            return
        say(f"stopping supervisord (pid {pid}) left over by an earlier demo")
        self._ctl("stop", "all", timeout=90)
        self._ctl("shutdown", timeout=30)
        deadline = time.monotonic() + 30
        while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
            time.sleep(0.2)

    def processes(self) -> list[dict[str, Any]]:
        """supervisord's view of every program process (name, statename, pid, logfile)."""
        infos: list[dict[str, Any]] = self.rpc().supervisor.getAllProcessInfo()
        self._child_pids.update(info["pid"] for info in infos if info["pid"])
        return infos

    def _ctl(self, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [self._supervisorctl, "-c", str(self.conf_path), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=ROOT,
        )

    def stop(self) -> None:
        """``supervisorctl stop all`` (graceful, in priority order), then ``shutdown``.

        Whatever fails on the way, supervisord and every program it ran are
        gone when this returns; an interrupt (a second Ctrl-C) kills them at once.
        """
        popen = self._popen
        if popen is None:
            return
        hurry = True
        try:
            if popen.poll() is None:
                with contextlib.suppress(OSError, xmlrpc.client.Error):
                    self.processes()  # remember every child, for the last resort below
                stop = self._ctl("stop", "all", timeout=120)
                if stop.returncode != 0:
                    say(f"supervisorctl stop all: {stop.stdout}{stop.stderr}")
                self._ctl("shutdown", timeout=30)
                popen.wait(30)
                self._stopped_cleanly = stop.returncode == 0
            hurry = False
        except (subprocess.TimeoutExpired, OSError) as exc:
            say(f"supervisord did not stop cleanly ({exc}); stopping it")
            hurry = False
        finally:
            self._kill_leftovers(popen, hurry)

    def _kill_leftovers(self, popen: subprocess.Popen[bytes], hurry: bool) -> None:
        with signals_ignored():
            if popen.poll() is None:
                if hurry:
                    say("interrupted again: killing supervisord and its programs")
                    popen.kill()
                    popen.wait()
                else:  # supervisord stops its programs on SIGTERM too
                    _stop_popen(popen, 75)
            if self._stopped_cleanly:
                return
            for pid in self._child_pids:  # each program runs in its own process group
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pid, signal.SIGKILL)
