"""Which Redis the demo uses, and leaving it as it was found.

The demo uses a Redis it was given (REDIS_URL), the default one if it
answers, or starts a private one (:class:`PrivateRedis`); in a server it did
not start it claims the ``distributed:*`` keys first and deletes them at the end.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import redis

from spiders_project.config import load_settings
from spiders_project.demo.output import DemoError, say, stop_popen, tail
from spiders_project.keys import RedisKeys
from spiders_project.redis_access.connection import RedisConfig, mask_url

K = RedisKeys("distributed")


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


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
            stop_popen(self._popen, 10)
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None


def choose_redis(stack: contextlib.ExitStack, run_dir: Path) -> tuple[str, bool]:
    """(REDIS_URL to use, whether the demo started that server itself)."""
    if os.environ.get("REDIS_URL", "") != "":
        return os.environ["REDIS_URL"], False
    default_url = RedisConfig.from_settings(load_settings()).url
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
