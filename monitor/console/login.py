"""``/login`` (a form with ``username`` and ``password``) and ``/logout``."""

from __future__ import annotations

import asyncio
import logging

from aiohttp import web

from monitor.console.auth import csrf_ok
from monitor.console.state import (
    CONSOLE,
    COOKIE,
    client_address,
    render,
    session_of,
    set_session_cookie,
)

logger = logging.getLogger("monitor.console")


def _next(request: web.Request, raw: str | None) -> str:
    """Where to go after logging in: a path of the console (as the console sees it,
    without the proxy's prefix), never another site."""
    console = request.app[CONSOLE]
    if raw and raw.startswith("/") and not raw.startswith("//") and "\\" not in raw:
        return console.config.prefix + raw
    return console.url("/")


async def login_form(request: web.Request) -> web.Response:
    if session_of(request) is not None:
        raise web.HTTPSeeOther(_next(request, request.query.get("next")))
    return render(request, "login.html", error=None, next=request.query.get("next", ""))


async def login(request: web.Request) -> web.Response:
    console = request.app[CONSOLE]
    form = await request.post()
    user = str(form.get("username", ""))[:200]
    password = str(form.get("password", ""))
    wanted = str(form.get("next", ""))
    address = client_address(request)
    counted = [f"user:{user}", f"addr:{address}"]
    if console.throttle.refused(counted):
        logger.warning("console: login of %r from %s refused: too many failures", user, address)
        return render(
            request,
            "login.html",
            status=429,
            error="Too many failed logins: wait and try again.",
            next=wanted,
        )
    console.users.reload()
    # bcrypt is slow on purpose: off the event loop.
    if not await asyncio.to_thread(console.users.check, user, password):
        console.throttle.failed(counted)
        logger.warning("console: failed login of %r from %s", user, address)
        return render(
            request, "login.html", status=401, error="Wrong user name or password.", next=wanted
        )
    console.throttle.succeeded(f"user:{user}")
    session = console.sessions.new(user)
    role = "operator" if console.may_act(session) else "viewer"
    logger.info("console: %s logged in from %s (%s)", user, address, role)
    response = web.HTTPSeeOther(_next(request, wanted))
    set_session_cookie(request, response, session)
    raise response


async def logout(request: web.Request) -> web.Response:
    console = request.app[CONSOLE]
    session = request["session"]
    form = await request.post()
    if not csrf_ok(session, form.get("csrf")):
        raise web.HTTPForbidden(text="missing or wrong CSRF token")
    console.sessions.end(session.token)
    logger.info("console: %s logged out", session.user)
    response = web.HTTPSeeOther(console.url("/login"))
    response.del_cookie(COOKIE, path=console.config.prefix + "/")
    raise response


def add_routes(app: web.Application) -> None:
    app.router.add_get("/login", login_form)
    app.router.add_post("/login", login)
    app.router.add_post("/logout", logout)
