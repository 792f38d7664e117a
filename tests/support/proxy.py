"""A small HTTP forward proxy for tests: what a crawler's proxy pool looks like from inside.

It serves plain-HTTP proxy requests (``GET http://host:port/path HTTP/1.1``,
a body of ``Content-Length`` bytes too: a login's POST), one per connection,
in a thread of its own. It checks the
``Proxy-Authorization`` it was given (``user``/``password``), and tells the
site which proxy a request came through by adding ``__via=<name>`` to the
query, which ``WildSite`` strips and records. ``requests`` counts what it
forwarded.
"""

from __future__ import annotations

import asyncio
import base64
import threading
from typing import Any


class TestProxy:
    __test__ = False

    def __init__(self, name: str, user: str = "", password: str = "") -> None:
        self.name = name
        self.auth = b"Basic " + base64.b64encode(f"{user}:{password}".encode()) if user else None
        self.user, self.password = user, password
        self.requests = 0
        self.refused_auth = 0
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"proxy-{name}", daemon=True)

    @property
    def url(self) -> str:
        creds = f"{self.user}:{self.password}@" if self.user else ""
        return f"http://{creds}127.0.0.1:{self.port}"

    def __enter__(self) -> TestProxy:
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._loop is not None and self._stopping is not None:
            self._loop.call_soon_threadsafe(self._stopping.set)
        self._thread.join(10)

    def _run(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        self._loop, self._stopping = asyncio.get_running_loop(), asyncio.Event()
        self._ready.set()
        await self._stopping.wait()
        server.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.split(b"\r\n")
            method, target, _ = lines[0].split(b" ", 2)
            headers = [line for line in lines[1:] if line]
            given = [
                h.split(b":", 1)[1].strip()
                for h in headers
                if h.lower().startswith(b"proxy-authorization:")
            ]
            if self.auth is not None and given != [self.auth]:
                self.refused_auth += 1
                writer.write(
                    b"HTTP/1.1 407 Proxy Authentication Required\r\n"
                    b"Content-Length: 0\r\nConnection: close\r\n\r\n"
                )
                return
            if not target.startswith(b"http://"):
                writer.write(
                    b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                )
                return
            hostport, _, path = target[len(b"http://") :].partition(b"/")
            path = b"/" + path
            path += (b"&" if b"?" in path else b"?") + b"__via=" + self.name.encode()
            host, _, port = hostport.partition(b":")
            self.requests += 1
            lengths = [
                int(h.split(b":", 1)[1].strip())
                for h in headers
                if h.lower().startswith(b"content-length:")
            ]
            body = await reader.readexactly(lengths[0]) if lengths else b""
            up_reader, up_writer = await asyncio.open_connection(host.decode(), int(port or 80))
            kept = [
                h
                for h in headers
                if not h.lower().startswith((b"proxy-", b"connection:", b"keep-alive:"))
            ]
            up_writer.write(
                method
                + b" "
                + path
                + b" HTTP/1.1\r\n"
                + b"\r\n".join([*kept, b"Connection: close"])
                + b"\r\n\r\n"
                + body
            )
            await up_writer.drain()
            while chunk := await up_reader.read(65536):
                writer.write(chunk)
            up_writer.close()
        except (OSError, ValueError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        finally:
            try:
                await writer.drain()
            except OSError:
                pass
            writer.close()
