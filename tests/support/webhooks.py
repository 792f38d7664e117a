"""A job webhooks' receiver for tests: an aiohttp server on a free port, in a thread.

Every POST's ``X-Crawler-Signature`` is checked with the secret, as a real
receiver would: a bad one is answered 401 and counted, never recorded. Each
path (``/a``, ``/b``, ...) is one webhook URL, told to answer ``ok`` (200),
``fail`` (500) or ``hang`` (no answer until the receiver stops) until told
otherwise; only the bodies answered 200 count as received.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any

from aiohttp import web

OK, FAIL, HANG = "ok", "fail", "hang"


@dataclass(frozen=True)
class Post:
    """One POST as the receiver saw it."""

    path: str
    body: dict[str, Any]
    answered: str  # OK, FAIL or HANG
    at: float  # time.monotonic() when it came


class Receiver:
    """``with Receiver(secret, "a", "b") as hooks: hooks.url("a") ...``"""

    def __init__(self, secret: str, *paths: str) -> None:
        self.secret = secret
        self.modes = dict.fromkeys(paths, OK)
        self.posts: list[Post] = []
        self.bad_signatures = 0
        self._lock = threading.Lock()
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self.port = self._sock.getsockname()[1]
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._serve, name="webhook receiver", daemon=True)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}/{path}"

    def urls(self) -> str:
        """JOB_WEBHOOK_URLS for every path."""
        return ",".join(self.url(path) for path in self.modes)

    def set(self, path: str, mode: str) -> None:
        self.modes[path] = mode

    def received(self, path: str) -> list[dict[str, Any]]:
        """Bodies answered 200 on ``path``, in arrival order."""
        with self._lock:
            return [p.body for p in self.posts if p.path == path and p.answered == OK]

    def tried(self, path: str, answered: str | None = None) -> list[Post]:
        with self._lock:
            return [
                p
                for p in self.posts
                if p.path == path and (answered is None or p.answered == answered)
            ]

    def __enter__(self) -> Receiver:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the webhook receiver did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(15)

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._main())
        self._loop.close()

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        app = web.Application()
        app.router.add_post("/{path}", self._handle)
        runner = web.AppRunner(app, shutdown_timeout=0.5)
        await runner.setup()
        await web.SockSite(runner, self._sock).start()
        self._ready.set()
        await self._stop.wait()
        await runner.cleanup()

    async def _handle(self, request: web.Request) -> web.Response:
        path = request.match_info["path"]
        raw = await request.read()
        expected = "sha256=" + hmac.new(self.secret.encode(), raw, hashlib.sha256).hexdigest()
        given = request.headers.get("X-Crawler-Signature", "")
        if not hmac.compare_digest(given, expected):
            with self._lock:
                self.bad_signatures += 1
            return web.Response(status=401)
        mode = self.modes.get(path)
        if mode is None:
            return web.Response(status=404)
        with self._lock:
            self.posts.append(Post(path, json.loads(raw), mode, time.monotonic()))
        if mode == HANG:
            assert self._stop is not None
            await self._stop.wait()
            return web.Response(status=503)
        return web.Response(status=200 if mode == OK else 500)
