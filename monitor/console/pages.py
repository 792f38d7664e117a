"""The console's pages: each reads bounded data in a thread and renders it.

A page is a template whose live parts (``regions``) are templates of their
own: the page renders them in place, and ``?live=1`` answers JSON with each
region rendered again (``{"regions": {"live-<name>": html}}``), which
``static/console.js`` swaps in every 1.5 s. The HTML is rendered here, with
autoescaping, in both cases: nothing the crawl fetched reaches the page
unescaped, and the script inserts only what the server rendered.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import redis
from aiohttp import web

from monitor.console.archive import latest_captures
from monitor.console.history import Chart, History, chart
from monitor.console.host_reads import (
    SEARCH_SHOWN,
    HostRow,
    read_hosts,
    read_job_hosts,
    steer_text,
)
from monitor.console.state import CONSOLE, Console, render
from spiders_project.crawl.hosts import host_key
from spiders_project.read_model.cluster_view import pages_per_second
from spiders_project.read_model.host_steering import InvalidSteering, check_host
from spiders_project.read_model.host_view import show
from spiders_project.read_model.job_progress import JobProgress
from spiders_project.redis_access import RedisUnavailable

Params = Mapping[str, str]
# Jobs a page of /jobs lists, those running or paused first.
JOBS_PER_PAGE = 100
ACTIVE = ("running", "paused")
# The longest search of a host name read (a URL's netloc, a name, a part of one).
SEARCH_MAX = 300


@dataclass(frozen=True)
class Page:
    template: str
    regions: tuple[str, ...]
    read: Callable[[Console, str, Params], dict[str, Any]]


def _overview(console: Console, spider: str, params: Params) -> dict[str, Any]:
    snap = console.reads.snapshot(spider, history=True)
    now = snap.view.time
    view = snap.spider
    history = console.history
    totals = {name: float(view.totals.get(name, 0)) for name in ("pages", "items")}
    history.add(spider, now, totals)
    if snap.redis_cpu is not None:
        history.add("redis", now, {"cpu": snap.redis_cpu})
    measured = pages_per_second(view, now, 60.0)
    return {
        "snap": snap,
        "view": view,
        "now": now,
        "pages_per_s": measured[0] if measured else history.rate(spider, "pages", now),
        "items_per_s": history.rate(spider, "items", now),
        "redis_cpu": history.rate("redis", "cpu", now),
        "chart": _chart(history, [*view.samples, *snap.history], spider, now),
    }


def _chart(history: History, samples: list[tuple[float, int]], spider: str, now: float) -> Chart:
    """The pages/s chart from the workers' samples (Redis: the last hour's, one a
    minute, and the last minutes', every publish) and the console's own."""
    merged = History()
    for at, pages in sorted([*history.samples(spider, "pages"), *samples]):
        merged.add(spider, at, {"pages": float(pages)})
    return chart(merged.per_bucket(spider, "pages", now), now, merged.covered(spider, now))


def _jobs(console: Console, spider: str, params: Params) -> dict[str, Any]:
    snap = console.reads.snapshot(spider, workers=False)
    jobs = sorted(snap.spider.jobs, key=lambda j: (j.state not in ACTIVE, j.id))
    pages = max(1, -(-len(jobs) // JOBS_PER_PAGE))
    try:
        page_no = min(max(int(params.get("page", "1")), 1), pages)
    except ValueError:
        page_no = 1
    shown = jobs[(page_no - 1) * JOBS_PER_PAGE : page_no * JOBS_PER_PAGE]
    states = Counter(j.state for j in jobs)
    return {
        "jobs": shown,
        "total": len(jobs),
        "states": sorted(states.items()),
        "pages": pages,
        "page_no": page_no,
        "now": snap.view.time,
    }


def _job(console: Console, spider: str, params: Params) -> dict[str, Any]:
    job = params["job"]
    snap = console.reads.snapshot(spider, workers=False)
    found = [j for j in snap.spider.jobs if j.id == job]
    if not found:
        raise web.HTTPNotFound(text=f"no job {job}")
    hosts = list(dict.fromkeys(console.defaults.host_of(url) for url in found[0].seeds))
    return {
        "job": found[0],
        "hosts": read_job_hosts(console.reads.send, snap.keys, job, hosts),
        "events": console.reads.job_events(spider, job),
    }


@dataclass(frozen=True)
class HostSearch:
    """A search of the hosts page: the last sweep's names containing ``part``,
    and the host ``exact`` names, each with its sizes read now."""

    part: str  # what the names must contain, lower case
    exact: str | None  # the host the search names as the frontier names it, if it names one
    exact_row: HostRow | None  # its state now; None unless the frontier holds some of it
    matches: list[HostRow]  # names of the last pass containing ``part`` (the exact one aside)
    more: bool  # more names matched than shown
    searched: int  # names searched: the last pass's (0 before the first ends)


def search_terms(asked: str) -> tuple[str, str | None]:
    """What a search asks for: the part of a name to look for, lower case, and the
    host it names exactly, if it names one (a URL names its host)."""
    text = asked.strip()[:SEARCH_MAX]
    hostport = text.split("://")[-1].split("/")[0] if "/" in text else text
    try:
        exact: str | None = check_host(host_key(hostport))
    except (InvalidSteering, ValueError):
        exact = None
    return exact or hostport.lower(), exact


def _hosts(console: Console, spider: str, params: Params) -> dict[str, Any]:
    """The live reads (``host_reads.py``) of the candidates, the last sweep's busiest
    and a search's matches: bounded by TOP_KEPT + SEARCH_SHOWN besides the candidates."""
    sweep = console.sweep.result(spider)
    also = [host for host, _ in sweep.top] if sweep else []
    asked = params.get("q", "").strip()
    part, exact, more = "", None, False
    found: list[str] = []
    if asked:
        part, exact = search_terms(asked)
        if sweep is not None:
            found, more = sweep.names.containing(part, SEARCH_SHOWN)
        also += [*found, *([exact] if exact else [])]
    view = read_hosts(console.reads.send, console.reads.keys(spider), also)
    search = None
    if asked:
        row = view.rows.get(exact) if exact else None
        search = HostSearch(
            part,
            exact,
            row if row is not None and (row.live or row.steer) else None,
            [view.rows[h] for h in found if h != exact],
            more,
            sweep.hosts if sweep else 0,
        )
    return {
        "hosts": view,
        "sweep": sweep,
        "sweeping": console.sweep.progress(spider),
        "search": search,
        "asked": asked,
        "wall": time.time(),
    }


def _host(console: Console, spider: str, params: Params) -> dict[str, Any]:
    try:
        host = check_host(params["host"])
    except InvalidSteering:
        raise web.HTTPNotFound(text="not a host name as the frontier names it") from None
    defaults = console.defaults
    state = show(
        console.reads.calls,
        console.reads.keys(spider),
        host,
        defaults.delay_ms(host),
        defaults.cap,
    )
    return {"host": host, "state": state}


def _dead(console: Console, spider: str, params: Params) -> dict[str, Any]:
    return {"dead": console.reads.dead_letters(spider)}


def _workers(console: Console, spider: str, params: Params) -> dict[str, Any]:
    snap = console.reads.snapshot(spider)
    return {"workers": snap.workers, "now": snap.view.time}


def _archive(console: Console, spider: str, params: Params) -> dict[str, Any]:
    url = params.get("url", "").strip()
    directory = console.config.warc_dir
    if directory is None:
        raise web.HTTPNotFound(text="no archive: WARC_ENABLED is off, or WARC_DIR is not here")
    if not url:
        return {"asked": "", "found": [], "files_read": 0, "files": 0}
    found, read, files = latest_captures(directory, url)
    return {"asked": url, "found": found, "files_read": read, "files": files}


PAGES = {
    "overview": Page("overview.html", ("overview_stats", "overview_chart"), _overview),
    "jobs": Page("jobs.html", ("jobs_rows",), _jobs),
    "job": Page("job.html", ("job_counts", "job_hosts", "job_events"), _job),
    "hosts": Page("hosts.html", ("hosts_lists",), _hosts),
    "host": Page("host.html", ("host_state",), _host),
    "deadletters": Page("deadletters.html", ("dead_summary",), _dead),
    "workers": Page("workers.html", ("workers_rows",), _workers),
    "archive": Page("archive.html", (), _archive),
}


def spider_of(request: web.Request) -> str:
    """The spider asked for (``?spider=``), one the monitor reports on; the first by default."""
    spiders = request.app[CONSOLE].spiders
    asked = request.query.get("spider", spiders[0])
    if asked not in spiders:
        raise web.HTTPNotFound(text=f"no spider {asked} here (MONITOR_SPIDERS)")
    return asked


def _clock(at: float | None) -> str:
    return datetime.fromtimestamp(at or time.time(), UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _eta(job: JobProgress) -> str:
    """A job's ETA as the page shows it: an estimate, or why there is none."""
    if job.eta_s is None:
        return "unknown" if job.queued else "–"
    seconds = int(job.eta_s)
    if seconds >= 3600:
        return f"~{seconds // 3600} h {seconds % 3600 // 60} min"
    return f"~{seconds // 60} min {seconds % 60} s" if seconds >= 60 else f"~{seconds} s"


async def show_page(request: web.Request, name: str) -> web.Response:
    console = request.app[CONSOLE]
    page = PAGES[name]
    spider = spider_of(request)
    live = "live" in request.query
    params = {**request.query, **request.match_info}
    session = request["session"]
    common = {
        "page": name,
        "spider": spider,
        "csrf": session.csrf,
        "steer_text": steer_text,
        "eta": _eta,
        "sp": spider if len(console.spiders) > 1 else None,
        "clock": _clock,
        "ago": lambda at, now: max(0.0, now - at),
    }
    try:
        context = await asyncio.to_thread(page.read, console, spider, params)
    except (RedisUnavailable, redis.RedisError) as exc:
        cause = exc.cause if isinstance(exc, RedisUnavailable) else exc
        error = f"Redis unavailable ({type(cause).__name__}: {cause})"
        if live:
            return web.json_response({"error": error, "at": _clock(None)})
        return render(request, "unavailable.html", status=503, error=error, **common)
    context.update(common)
    if live:
        env = console.env
        regions = {
            f"live-{region}": env.get_template(f"{region}.html").render(
                session=session,
                may_act=console.may_act(session),
                actions_on=console.actions is not None,
                **context,
            )
            for region in page.regions
        }
        return web.json_response({"regions": regions, "at": _clock(context.get("now"))})
    flash, session.flash = session.flash, []
    query = {k: v for k, v in request.query.items() if k != "live"}
    live_url = console.url(request.path, **query, live=1) if page.regions else ""
    return render(
        request, page.template, flash=flash, live_url=live_url, regions=page.regions, **context
    )


def _handler(name: str) -> Callable[[web.Request], Any]:
    async def handle(request: web.Request) -> web.Response:
        return await show_page(request, name)

    return handle


def add_routes(app: web.Application) -> None:
    routes = {
        "/": "overview",
        "/hosts": "hosts",
        "/jobs": "jobs",
        "/jobs/{job}": "job",
        "/hosts/{host}": "host",
        "/deadletters": "deadletters",
        "/workers": "workers",
        "/archive": "archive",
    }
    for path, name in routes.items():
        app.router.add_get(path, _handler(name))
