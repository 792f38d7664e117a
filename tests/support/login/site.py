"""A site behind a login form, as many real ones are, that logs every request it gets.

- ``GET /login`` sets a pre-session cookie (``pre``) and serves a form with a
  hidden CSRF token bound to it.
- ``POST /login`` with that cookie, its token and a known user's password
  sets the session cookie (``session``, HttpOnly) and a ``consent`` cookie,
  and redirects (302) to ``/home``.
- ``/home`` and ``/p/<n>`` (a binary tree of ``pages`` pages) need the session;
  without one they answer 200 with a "please log in" page and no link, as real
  sites do. Their links carry ``?u=<user>`` of the session, so a request that
  went out with another user's session is seen (``Hit.mixed``).
- ``/forget`` removes the ``consent`` cookie (an expired Set-Cookie) and links to
  ``/f/<n>``: requests that must no longer send it.
- ``/open/<n>`` (a binary tree of ``pages`` pages) need no login; what they
  set is ``open_cookie``: ``"visit"``, a ``visit`` cookie on every answer;
  ``"session"``, a session cookie (``session``, HttpOnly) on the answer to a
  visitor without a session the site made, as a site that keeps a session for
  every visitor does (``made`` records each, with the proxy it was made
  through, and ``ban_proxy_after`` counts these pages); None, no cookie.

With ``js=True`` the member pages but ``/home`` need JavaScript, as a
single-page app's do: each is a shell whose script asks ``/api/<page>`` for its
user and links (with the session, which the browser sends from its own cookie
store) and adds ``#done`` when it has shown them. The script of ``/p/1`` also
sets a ``member`` cookie (``document.cookie``) that the pages below it require:
their ``/api`` answers 403 without it. ``/home``, the login's redirect, stays a
plain page.

Sessions that end, as real sites end them:

- ``login_redirect``: a page behind the login asked without a session the
  site knows redirects (302) to ``/login`` instead.
- ``expire_after=N``: the first session ends (the site forgets it) once it
  has been served N pages behind the login.
- ``max_logins=N``: the site takes N logins; every later one is refused with
  a redirect to ``/login?error=1`` (an account locked).
- Through a proxy (``tests/support/proxy.py``, which adds ``__via=<name>`` to
  the query; stripped here into ``Hit.via``): ``ban_proxy_after=N`` bans the
  first proxy through which N pages behind the login were served: everything
  through it from then on is answered 403.

``hold(path)`` keeps the answer to ``path`` waiting until ``release()``: a
test kills a worker while one of its requests is at the site.
"""

from __future__ import annotations

import html
import json
import secrets
import threading
import time
from dataclasses import dataclass
from http.cookies import SimpleCookie
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

from tests.support.threaded_site import ThreadedSite

PASSWORDS = {"alice": "wonderland", "bob": "builder"}


@dataclass(frozen=True)
class Hit:
    """One request as the site saw it."""

    at: float  # time.monotonic() of its arrival
    method: str
    path: str  # with its query
    cookies: dict[str, str]
    user: str | None  # whose session it carried (None: none, or not a valid one)
    agent: str = ""  # its User-Agent (tests give each worker its own)
    via: str | None = None  # the proxy it came through

    @property
    def session(self) -> str | None:
        """The session token it carried, valid or not."""
        return self.cookies.get("session")

    @property
    def page(self) -> str:
        return self.path.split("?", 1)[0]

    @property
    def mixed(self) -> bool:
        """A link meant for one user that went out with another's session."""
        wanted = parse_qs(urlsplit(self.path).query).get("u")
        return bool(wanted) and self.user is not None and wanted != [self.user]


class LoginSite(ThreadedSite):
    """``with LoginSite(pages=40) as site:`` serves on a free port of 127.0.0.1."""

    def __init__(
        self,
        pages: int = 40,
        latency: float = 0.0,
        js: bool = False,
        *,
        login_redirect: bool = False,
        expire_after: int | None = None,
        max_logins: int | None = None,
        ban_proxy_after: int | None = None,
        open_cookie: str | None = "visit",
    ) -> None:
        self.pages = pages
        self.open_cookie = open_cookie
        self.latency = latency
        self.js = js
        self.login_redirect = login_redirect
        self.expire_after = expire_after
        self.max_logins = max_logins
        self.ban_proxy_after = ban_proxy_after
        self._lock = threading.Lock()
        self._hits: list[Hit] = []
        self._pre: dict[str, str] = {}  # pre-session -> its CSRF token
        self.sessions: dict[str, str] = {}  # session token -> user
        self.members: dict[str, str] = {}  # session token -> its member cookie (js)
        # Every session the site ever made (token -> the proxy it was made through),
        # those it ended, and the pages each was served.
        self.made: dict[str, str | None] = {}
        self.ended: set[str] = set()
        self._served: dict[str, int] = {}
        self._served_via: dict[str, int] = {}
        self.banned: str | None = None  # the proxy the site banned, and when
        self.banned_at = float("inf")
        self._held: dict[str, threading.Event] = {}
        super().__init__()

    def __exit__(self, *exc: object) -> None:
        self.release()
        super().__exit__(*exc)

    # --- what tests ask ----------------------------------------------------------------
    @property
    def login_url(self) -> str:
        return self.url + "login"

    def log(self) -> list[Hit]:
        with self._lock:
            return list(self._hits)

    def member_pages(self) -> set[str]:
        """Every page behind the login a crawl should reach (paths, without queries)."""
        return (
            {"/home", "/forget"}
            | {f"/p/{n}" for n in range(1, self.pages)}
            | {f"/f/{n}" for n in range(1, 5)}
        )

    def rendered_pages(self) -> set[str]:
        """The member pages that need JavaScript (``js=True``)."""
        return self.member_pages() - {"/home"}

    def member_only(self) -> set[str]:
        """The pages whose content needs the ``member`` cookie /p/1's script sets."""
        return {f"/p/{n}" for n in range(3, self.pages) if _below_first(n)}

    def hold(self, path: str) -> None:
        with self._lock:
            self._held[path] = threading.Event()

    def release(self) -> None:
        with self._lock:
            held, self._held = list(self._held.values()), {}
        for event in held:
            event.set()

    # --- serving --------------------------------------------------------------------------
    def _answer(self, handler: BaseHTTPRequestHandler) -> None:
        arrived = time.monotonic()
        method = handler.command
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length).decode() if length else ""
        jar = SimpleCookie(handler.headers.get("Cookie") or "")
        cookies = {name: morsel.value for name, morsel in jar.items()}
        path, via = _strip_via(handler.path)
        with self._lock:
            user = self.sessions.get(cookies.get("session", ""))
            agent = handler.headers.get("User-Agent") or ""
            self._hits.append(Hit(arrived, method, path, cookies, user, agent, via))
            held = self._held.get(path.split("?", 1)[0])
        if held is not None:
            held.wait(120)
        if self.latency:
            time.sleep(self.latency)
        if via is not None and via == self.banned:
            status, headers, page = 403, [], _html("Blocked", "too many requests from you")
        else:
            status, headers, page = self._route(method, path, body, cookies, user, via)
        data = page.encode()
        try:
            handler.send_response(status)
            for name, value in headers:
                handler.send_header(name, value)
            handler.send_header("Content-Type", "text/html; charset=utf-8")
            handler.send_header("Content-Length", str(len(data)))
            handler.end_headers()
            handler.wfile.write(data)
        except ConnectionError:
            pass  # a held request's worker was killed

    def _route(
        self,
        method: str,
        path: str,
        body: str,
        cookies: dict[str, str],
        user: str | None,
        via: str | None = None,
    ) -> tuple[int, list[tuple[str, str]], str]:
        page, _, query = path.partition("?")
        if page == "/login" and method == "GET":
            pre, token = secrets.token_hex(8), secrets.token_hex(8)
            with self._lock:
                self._pre[pre] = token
            form = (
                '<form method="post" action="/login">'
                f'<input type="hidden" name="csrf" value="{token}">'
                '<input name="username"><input type="password" name="password">'
                '<input type="submit" value="Log in"></form>'
            )
            return 200, [("Set-Cookie", f"pre={pre}; Path=/")], _html("Log in", form)
        if page == "/login" and method == "POST":
            form = {k: v[0] for k, v in parse_qs(body).items()}
            with self._lock:
                expected = self._pre.pop(cookies.get("pre", ""), None)
            name = form.get("username", "")
            if expected is None or form.get("csrf") != expected:
                return 403, [], _html("Forbidden", "bad CSRF token")
            if PASSWORDS.get(name) != form.get("password"):
                return 403, [], _html("Forbidden", "bad password")
            with self._lock:
                refused = self.max_logins is not None and len(self.made) >= self.max_logins
            if refused:
                return 302, [("Location", "/login?error=1")], ""
            session = secrets.token_hex(16)
            with self._lock:
                self.sessions[session] = name
                self.made[session] = via
            headers = [
                ("Set-Cookie", f"session={session}; Path=/; HttpOnly"),
                ("Set-Cookie", "consent=yes; Path=/"),
                ("Location", f"/home?u={name}"),
            ]
            return 302, headers, ""
        if page.startswith("/open/"):
            return self._open(page, cookies, via)
        if self.js and page.startswith("/api/"):
            return self._api(page.removeprefix("/api"), cookies, user)
        if page not in self.member_pages():
            return 404, [], _html("Not found", "")
        if user is None:
            if self.login_redirect:
                return 302, [("Location", "/login")], ""
            return 200, [], _html("Please log in", '<p id="user"></p>')
        self._serve(cookies["session"], via)
        headers = []
        if page == "/forget":
            expired = "consent=; Path=/; Expires=Thu, 01 Jan 1970 00:00:00 GMT"
            headers.append(("Set-Cookie", expired))
        if self.js and page in self.rendered_pages():
            return 200, headers, _shell(page, query)
        return 200, headers, _member(page, user, self._member_links(page, user))

    def open_pages(self) -> set[str]:
        """Every ``/open/`` page (paths)."""
        return {f"/open/{n}" for n in range(self.pages)}

    def _open(
        self, page: str, cookies: dict[str, str], via: str | None
    ) -> tuple[int, list[tuple[str, str]], str]:
        n = _number(page, "/open/")
        links = [f"/open/{c}" for c in (2 * n + 1, 2 * n + 2) if c < self.pages]
        headers = []
        if self.open_cookie == "visit":
            headers.append(("Set-Cookie", f"visit={n}; Path=/"))
        elif self.open_cookie == "session":
            session = cookies.get("session", "")
            with self._lock:
                new = session not in self.made
                if new:
                    session = secrets.token_hex(16)
                    self.made[session] = via
            if new:
                headers.append(("Set-Cookie", f"session={session}; Path=/; HttpOnly"))
            self._serve(session, via)
        return 200, headers, _html(f"Open {n}", _links(links))

    def _member_links(self, page: str, user: str) -> list[str]:
        """A member page's links, each for its user."""
        if page == "/home":
            links = ["/p/1", "/p/2", "/forget"]
        elif page == "/forget":
            links = [f"/f/{n}" for n in range(1, 5)]
        elif page.startswith("/p/"):
            n = _number(page, "/p/")
            links = [f"/p/{c}" for c in (2 * n + 1, 2 * n + 2) if c < self.pages]
        else:
            links = []
        return [f"{link}?u={user}" for link in links]

    def _api(
        self, page: str, cookies: dict[str, str], user: str | None
    ) -> tuple[int, list[tuple[str, str]], str]:
        """What a JavaScript page's script asks for: its user and links (JSON)."""
        if page not in self.rendered_pages():
            return 404, [], json.dumps({"error": "not found"})
        if user is None:
            return 401, [], json.dumps({"error": "log in"})
        session = cookies["session"]
        data: dict[str, Any] = {"user": user, "links": self._member_links(page, user)}
        with self._lock:
            if page == "/p/1":
                data["member"] = self.members.setdefault(session, secrets.token_hex(8))
            elif page in self.member_only() and cookies.get("member") != self.members.get(session):
                return 403, [], json.dumps({"error": "no member cookie"})
        return 200, [], json.dumps(data)

    def _serve(self, session: str, via: str | None) -> None:
        """Count a page behind the login served to ``session`` through ``via``;
        end the first session, or ban the first proxy, at its bound."""
        with self._lock:
            served = self._served[session] = self._served.get(session, 0) + 1
            first = next(iter(self.made), None)
            if self.expire_after is not None and session == first and served >= self.expire_after:
                self.sessions.pop(session, None)
                self.ended.add(session)
            if via is None or self.ban_proxy_after is None or self.banned is not None:
                return
            through = self._served_via[via] = self._served_via.get(via, 0) + 1
            if through >= self.ban_proxy_after:
                self.banned, self.banned_at = via, time.monotonic()


def _strip_via(path: str) -> tuple[str, str | None]:
    """``path`` without the test proxy's ``__via`` parameter, and its value."""
    page, _, query = path.partition("?")
    if "__via=" not in query:
        return path, None
    pairs = [(k, v) for k, v in parse_qs(query, keep_blank_values=True).items()]
    via = dict(pairs).get("__via", [None])[0]
    rest = [(k, x) for k, values in pairs if k != "__via" for x in values]
    return (f"{page}?{urlencode(rest)}" if rest else page), via


def _number(page: str, prefix: str) -> int:
    rest = page[len(prefix) :]
    return int(rest) if rest.isdigit() else 0


def _below_first(n: int) -> bool:
    """Whether /p/<n> is below /p/1 in the pages' tree (children 2n+1 and 2n+2)."""
    while n > 2:
        n = (n - 1) // 2
    return n == 1


def _shell(page: str, query: str) -> str:
    """A page that only shows its content once its script ran."""
    api = json.dumps(f"/api{page}" + (f"?{query}" if query else ""))
    script = (
        f"fetch({api}).then(r => r.json()).then(d => {{"
        "if (d.member) document.cookie = 'member=' + d.member + '; path=/';"
        "document.getElementById('user').textContent = d.user || '';"
        "for (const h of d.links || []) {"
        "const a = document.createElement('a'); a.href = h; a.textContent = h;"
        "document.body.appendChild(a);}"
        "const done = document.createElement('p'); done.id = 'done';"
        "document.body.appendChild(done);});"
    )
    return _html(page, f'<p id="user"></p><script>{script}</script>')


def _links(hrefs: list[str]) -> str:
    return "".join(f'<a href="{html.escape(h)}">{html.escape(h)}</a>\n' for h in hrefs)


def _member(page: str, user: str, links: list[str]) -> str:
    return _html(page, f'<p id="user">{user}</p>{_links(links)}')


def _html(title: str, body: str) -> str:
    return f"<html><head><title>{title}</title></head><body>{body}</body></html>"
