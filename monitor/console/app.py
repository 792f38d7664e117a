"""The monitor's web application: ``/metrics`` always, the console beside it when configured.

``/metrics`` answers as prometheus_client's own server did (the encoder the
``Accept`` header asks for, ``name[]`` filters, gzip when accepted), rendered
in a thread: a scrape that waits on Redis never holds the event loop. The
console (``CONSOLE_HTPASSWD``) adds its pages (:mod:`monitor.console.pages`),
``/login``, ``/logout``, ``/healthz`` and ``/static/``; every other path needs
a session. Every console response carries a Content-Security-Policy that
allows no inline script, and is not cached.

Behind a reverse proxy at a path prefix (``CONSOLE_PREFIX``, e.g.
``/crawler``): the proxy strips the prefix, the console writes it into its
links, redirects and cookie path (docs/SECURITY.md). A proxy's
X-Forwarded-For is believed only from a loopback peer (the proxy on this node),
for the login throttle's per-address count.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder, gzip_accepted

from monitor.console import forms, login, pages
from monitor.console.state import CONSOLE, Console, session_of
from spiders_project.plumbing.tasks import repeat, spawn_loop, stop_tasks

logger = logging.getLogger("monitor.console")

HERE = Path(__file__).parent
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
# Paths that need no session: the login, the exporter's, a health check, the assets.
PUBLIC = ("/login", "/metrics", "/healthz", "/static/")
# Seconds between the history's samples of the spiders' totals.
SAMPLE_EVERY = 10.0

REGISTRY: web.AppKey[CollectorRegistry] = web.AppKey("registry", CollectorRegistry)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


async def metrics(request: web.Request) -> web.Response:
    registry = request.app[REGISTRY]
    names = request.query.getall("name[]", [])

    def render() -> tuple[bytes, str]:
        encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
        return encoder(registry.restricted_registry(names) if names else registry), content_type

    body, content_type = await asyncio.to_thread(render)
    response = web.Response(body=body, headers={"Content-Type": content_type})
    if gzip_accepted(request.headers.get("Accept-Encoding", "")):
        response.enable_compression(web.ContentCoding.gzip)
    return response


async def healthz(request: web.Request) -> web.Response:
    return web.Response(text="ok\n")


@web.middleware
async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Sessions, and the headers every console response carries (errors and redirects too)."""
    public = request.path.startswith(PUBLIC)
    try:
        response = await _checked(request, handler, public)
    except web.HTTPException as exc:
        _headers(exc, public)
        raise
    _headers(response, public)
    return response


async def _checked(request: web.Request, handler: Handler, public: bool) -> web.StreamResponse:
    if not public:
        session = session_of(request)
        if session is None:
            if request.method != "GET":
                raise web.HTTPForbidden(text="log in first")
            if "live" in request.query:
                raise web.HTTPUnauthorized(text="session ended")
            console = request.app[CONSOLE]
            raise web.HTTPSeeOther(console.url("/login", next=request.path_qs))
        request["session"] = session
    return await handler(request)


def _headers(response: web.StreamResponse, public: bool) -> None:
    response.headers["Content-Security-Policy"] = CSP
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["X-Frame-Options"] = "DENY"
    response.headers["Referrer-Policy"] = "same-origin"
    if not public:
        response.headers["Cache-Control"] = "no-store"


def build_app(registry: CollectorRegistry, console: Console | None) -> web.Application:
    """``/metrics`` on ``registry``; with ``console``, the console's routes too."""
    middlewares = [guard] if console is not None else []
    app = web.Application(middlewares=middlewares)
    app[REGISTRY] = registry
    app.router.add_get("/metrics", metrics)
    if console is None:
        return app
    app[CONSOLE] = console
    app.router.add_get("/healthz", healthz)
    app.router.add_static("/static/", HERE / "static", show_index=False)
    login.add_routes(app)
    pages.add_routes(app)
    forms.add_routes(app)
    app.cleanup_ctx.append(_background)
    return app


async def _background(app: web.Application) -> AsyncIterator[None]:
    """The console's loops, for as long as the application runs: the history's
    samples and the hosts' sweep. Either ending otherwise than cancelled ends the
    process, loudly (``plumbing/tasks.py``): the pages would show stale data as
    current."""
    console = app[CONSOLE]

    async def sample() -> None:
        """The history's sample of each spider's totals."""
        at, totals = await asyncio.to_thread(console.reads.totals)
        for spider, values in totals.items():
            console.history.add(spider, at, {k: float(v) for k, v in values.items()})

    tasks = [
        spawn_loop(
            "console history sampler", repeat(sample, SAMPLE_EVERY, "console sample", logger)
        ),
        spawn_loop("console host sweep", console.sweep.run()),
    ]
    yield
    await stop_tasks(tasks)
