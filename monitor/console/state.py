"""What the console's handlers share: its state, its sessions' cookie, the client's address."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlencode

import jinja2
from aiohttp import web

from monitor.config import ConsoleConfig
from monitor.console.actions import Actions, HostDefaults
from monitor.console.auth import Session, Sessions, Throttle, Users
from monitor.console.history import History
from monitor.console.host_sweep import HostSweep
from monitor.console.reads import Reads

COOKIE = "console_session"


@dataclass
class Console:
    """Everything the console's handlers share."""

    config: ConsoleConfig
    users: Users
    sessions: Sessions
    throttle: Throttle
    reads: Reads
    defaults: HostDefaults
    actions: Actions | None  # None: read-only for everyone (no CONSOLE_REDIS_URL)
    sweep: HostSweep  # the hosts ranked and named in the background; the app runs it
    history: History = field(default_factory=History)
    env: jinja2.Environment = field(init=False)

    def __post_init__(self) -> None:
        self.env = jinja2.Environment(
            loader=jinja2.PackageLoader("monitor.console", "templates"),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
        )
        self.env.globals["url"] = self.url
        self.env.filters["q"] = lambda value: quote(str(value), safe="")

    @property
    def spiders(self) -> tuple[str, ...]:
        return self.reads.spiders

    def url(self, path: str, **query: object) -> str:
        """``path`` under the console's prefix, with ``query`` (None values left out)."""
        given = {k: str(v) for k, v in query.items() if v is not None}
        return self.config.prefix + path + (("?" + urlencode(given)) if given else "")

    def may_act(self, session: Session) -> bool:
        return self.actions is not None and self.users.may_act(session.user)


CONSOLE: web.AppKey[Console] = web.AppKey("console", Console)


def client_address(request: web.Request) -> str:
    """The client's address: the peer's, or the last X-Forwarded-For hop when the
    peer is a proxy on this node (loopback)."""
    peer = request.remote or ""
    forwarded = request.headers.get("X-Forwarded-For", "")
    try:
        local = ipaddress.ip_address(peer).is_loopback
    except ValueError:
        local = False
    if local and forwarded:
        return forwarded.split(",")[-1].strip() or peer
    return peer


def secure(request: web.Request) -> bool:
    """Whether the browser reached us over TLS (directly, or through a TLS proxy)."""
    return request.secure or request.headers.get("X-Forwarded-Proto", "").lower() == "https"


def session_of(request: web.Request) -> Session | None:
    return request.app[CONSOLE].sessions.get(request.cookies.get(COOKIE))


def set_session_cookie(
    request: web.Request, response: web.StreamResponse, session: Session
) -> None:
    console = request.app[CONSOLE]
    response.set_cookie(
        COOKIE,
        session.token,
        path=console.config.prefix + "/",
        httponly=True,
        samesite="Strict",
        secure=secure(request),
    )


def render(request: web.Request, template: str, status: int = 200, **context: Any) -> web.Response:
    """``template`` with ``context``, and who is looking (its session, if any)."""
    console = request.app[CONSOLE]
    session: Session | None = request.get("session")
    context.setdefault("sp", None)
    html = console.env.get_template(template).render(
        session=session,
        may_act=session is not None and console.may_act(session),
        actions_on=console.actions is not None,
        archive_on=console.config.warc_dir is not None,
        spiders=console.spiders,
        **context,
    )
    return web.Response(text=html, content_type="text/html", status=status)
