"""A local test site served by http.server threads, the base of the tests' small sites.

The recrawl tests' versioned site, the freshness benchmark's timetable site
and the login site each answer requests in their own way; serving them (a
free port of 127.0.0.1, a thread per connection, no request log on stderr,
``with`` to start and stop) is the same, and lives here once.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self


class ThreadedSite:
    """A site on a free port of 127.0.0.1, for ``with``: a subclass sets its own
    state, calls ``super().__init__()`` and answers every GET and POST in
    ``_answer`` (``handler.command`` says which)."""

    def __init__(self) -> None:
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                site._answer(self)

            def do_POST(self) -> None:  # noqa: N802
                site._answer(self)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/"

    def __enter__(self) -> Self:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _answer(self, handler: BaseHTTPRequestHandler) -> None:
        raise NotImplementedError
