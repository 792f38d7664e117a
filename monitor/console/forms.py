"""The console's actions as HTTP: one POST per button, checked, then done by ``actions.py``.

Each POST must carry its session's CSRF token (a hidden ``csrf`` field, 403
without it), and its user must be an operator (``CONSOLE_OPERATORS``) on a
console that may act (``CONSOLE_REDIS_URL``): anyone else gets 403 and nothing
changes. A refusal (a job that cannot be paused, a bad delay) or a Redis that
does not answer comes back as a message on the page the button was on
(303 See Other to it, so a reload does not send the form again).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from urllib.parse import quote

import redis
from aiohttp import web
from multidict import MultiDictProxy

from monitor.console.actions import JOB_STATES, ActionRefused, Actions
from monitor.console.auth import csrf_ok
from monitor.console.state import CONSOLE
from spiders_project.read_model.host_steering import InvalidSteering, check_host
from spiders_project.redis_access import RedisUnavailable

logger = logging.getLogger("monitor.console")

Form = MultiDictProxy[str | bytes | bytearray | web.FileField]
HOST_ACTIONS = ("apply", "block", "unblock", "purge")
DEAD_ACTIONS = ("requeue", "purge")


def _field(form: Form, name: str) -> str:
    value = form.get(name, "")
    return value if isinstance(value, str) else ""


async def _act(
    request: web.Request, what: str, back: str, do: Callable[[Actions, str, str], str]
) -> web.Response:
    """Check the request, run ``do(actions, spider, user)`` in a thread, go ``back``."""
    console = request.app[CONSOLE]
    session = request["session"]
    form: Form = await request.post()
    if not csrf_ok(session, _field(form, "csrf")):
        logger.warning("console: %s: %s refused: missing or wrong CSRF token", session.user, what)
        raise web.HTTPForbidden(text="missing or wrong CSRF token")
    if not console.may_act(session) or console.actions is None:
        logger.warning("console: %s: %s refused: not an operator", session.user, what)
        raise web.HTTPForbidden(text=f"{session.user} may not act here")
    spider = _field(form, "spider") or console.spiders[0]
    if spider not in console.spiders:
        raise web.HTTPBadRequest(text=f"no spider {spider} here")
    actions = console.actions
    try:
        done = await asyncio.to_thread(do, actions, spider, session.user)
        session.flash.append(("ok", done))
    except ActionRefused as exc:
        logger.info("console: %s: %s refused: %s", session.user, what, exc)
        session.flash.append(("error", str(exc)))
    except (RedisUnavailable, redis.RedisError) as exc:
        cause = exc.cause if isinstance(exc, RedisUnavailable) else exc
        logger.error("console: %s: %s failed: %s", session.user, what, cause)
        session.flash.append(("error", f"{what} failed: Redis answered {cause}"))
    raise web.HTTPSeeOther(console.url(back, spider=spider if len(console.spiders) > 1 else None))


async def submit(request: web.Request) -> web.Response:
    form: Form = await request.post()
    job = _field(form, "id").strip()
    urls = [u.strip() for u in _field(form, "urls").split() if u.strip()]
    raw_max = _field(form, "max_pages").strip()

    def do(actions: Actions, spider: str, user: str) -> str:
        try:
            max_pages = int(raw_max) if raw_max else None
        except ValueError:
            raise ActionRefused(f"max pages must be a whole number, not {raw_max[:20]!r}") from None
        return actions.submit(spider, job, urls, max_pages, user)

    return await _act(request, f"submit job {job!r}", "/jobs", do)


async def job_action(request: web.Request) -> web.Response:
    job, action = request.match_info["job"], request.match_info["action"]
    if action not in JOB_STATES:
        raise web.HTTPNotFound()
    form: Form = await request.post()
    back = "/jobs/" + quote(job, safe="") if _field(form, "back") == "job" else "/jobs"
    return await _act(
        request,
        f"{action} job {job!r}",
        back,
        lambda actions, spider, user: actions.job(spider, job, action, user),
    )


async def host_action(request: web.Request) -> web.Response:
    action = request.match_info["action"]
    try:
        host = check_host(request.match_info["host"])
    except InvalidSteering:
        raise web.HTTPNotFound(text="not a host name as the frontier names it") from None
    if action not in HOST_ACTIONS:
        raise web.HTTPNotFound()
    form: Form = await request.post()
    delay, cap = _field(form, "delay"), _field(form, "cap")

    def do(actions: Actions, spider: str, user: str) -> str:
        if action == "apply":
            return actions.steer(spider, host, delay=delay, cap=cap, by=user)
        if action == "purge":
            return actions.steer(spider, host, purge=True, by=user)
        blocked = action == "block"
        # A block empties the host's queue, as scrapy frontier host --block does.
        return actions.steer(spider, host, blocked=blocked, purge=blocked, by=user)

    return await _act(request, f"{action} host {host}", "/hosts/" + quote(host, safe=":[]"), do)


async def dead_action(request: web.Request) -> web.Response:
    action = request.match_info["action"]
    if action not in DEAD_ACTIONS:
        raise web.HTTPNotFound()
    form: Form = await request.post()
    raw = _field(form, "limit").strip()

    def do(actions: Actions, spider: str, user: str) -> str:
        if action == "purge":
            return actions.purge_dead(spider, user)
        try:
            limit = int(raw) if raw else None
        except ValueError:
            raise ActionRefused(f"how many must be a whole number, not {raw[:20]!r}") from None
        if limit is not None and limit < 1:
            raise ActionRefused("how many must be at least 1 (empty: all)")
        return actions.requeue_dead(spider, limit, user)

    return await _act(request, f"{action} dead letters", "/deadletters", do)


def add_routes(app: web.Application) -> None:
    app.router.add_post("/jobs", submit)
    app.router.add_post("/jobs/{job}/{action}", job_action)
    app.router.add_post("/hosts/{host}/{action}", host_action)
    app.router.add_post("/deadletters/{action}", dead_action)
