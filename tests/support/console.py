"""The console for tests: an htpasswd file, ``python -m monitor`` with it, an HTTP client.

The client keeps the session cookie as a browser does and reads each form's
CSRF token from the page it came from, so a test acts the way a person does.
"""

from __future__ import annotations

import http.cookiejar
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import bcrypt

from tests.support.monitoring import Exporter

CSRF = re.compile(r'name="csrf" value="([^"]+)"')


def write_htpasswd(path: Path, users: dict[str, str]) -> Path:
    """An htpasswd file as ``htpasswd -B`` writes it ("$2y$" hashes, cost 5)."""
    lines = []
    for user, password in users.items():
        hashed = bcrypt.hashpw(password.encode(), bcrypt.gensalt(5)).decode()
        lines.append(f"{user}:{hashed.replace('$2b$', '$2y$', 1)}")
    path.write_text("\n".join(lines) + "\n")
    return path


def console(redis_url: str, folder: Path, *settings: str, **users: str) -> Exporter:
    """``python -m monitor`` with the console on: ``users`` in its htpasswd file."""
    htpasswd = write_htpasswd(folder / "htpasswd", users or {"alice": "alice-pw"})
    return Exporter(redis_url, folder, f"CONSOLE_HTPASSWD={htpasswd}", *settings)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


class Client:
    """One browser's worth of cookies against ``base`` (``http://host:port[/prefix]``)."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(self.jar), _NoRedirect()
        )

    def request(
        self, path: str, form: dict[str, str] | None = None, headers: dict[str, str] | None = None
    ) -> tuple[int, dict[str, str], str]:
        """(status, headers, body) of one GET (or a POST of ``form``); redirects not followed."""
        data = urllib.parse.urlencode(form).encode() if form is not None else None
        request = urllib.request.Request(self.base + path, data=data, headers=headers or {})
        started = time.monotonic()
        try:
            with self.opener.open(request, timeout=30) as response:
                status, head, body = response.status, response.headers, response.read()
        except urllib.error.HTTPError as error:
            status, head, body = error.code, error.headers, error.read()
        self.elapsed = time.monotonic() - started
        return status, {k.lower(): v for k, v in head.items()}, body.decode(errors="replace")

    def login(self, user: str, password: str) -> int:
        status, _, _ = self.request("/login", {"username": user, "password": password})
        return status

    def csrf(self, path: str = "/jobs") -> str:
        status, _, body = self.request(path)
        assert status == 200, (path, status, body[:300])
        found = CSRF.search(body)
        assert found, body[:500]
        return found.group(1)

    def post(self, path: str, form: dict[str, str], *, csrf_from: str | None = "/jobs") -> int:
        """POST ``form`` with the CSRF token of the page ``csrf_from`` (None: without one)."""
        full = dict(form)
        if csrf_from is not None:
            full["csrf"] = self.csrf(csrf_from)
        status, _, _ = self.request(path, full)
        return status
