"""The console's pages on a large frontier: each must render in under 300 ms.

    python -m tests.bench.console_pages [--hosts 100000] [--jobs 1000] [--rounds 20]

Starts a private redis-server, fills it the way the crawl does (the frontier's
own enqueue script queues two requests of each of ``--hosts`` hosts, spread over
``--jobs`` jobs submitted with the jobs' own script; workers publish with the
heartbeat's script; dead letters, steered hosts, downloads in flight and hosts
at their cap besides), starts ``python -m monitor`` with the console, logs in,
waits for the console's sweep of the hosts to end its first pass (the hosts
page then reads its busiest too), then fetches each page ``--rounds`` times,
whole and live (``?live=1``), while the sweep goes on with its next passes,
and prints the median and worst time of each. Redis' INFO commandstats before
and after say which commands were sent: never SCAN or KEYS; ZSCAN and HSCAN
are the sweep's, walking the ready-set and two hashes of hosts.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import http.cookiejar
import json
import logging
import statistics
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import bcrypt
import redis

from monitor.console.host_reads import read_hosts
from monitor.console.host_sweep import SweepPass
from spiders_project.dead_letters.letters import make_dead_letter
from spiders_project.frontier.calls import enqueue_call
from spiders_project.frontier.codec import serialize
from spiders_project.frontier.scripts import FrontierScripts
from spiders_project.frontier.seen import SeenConfig
from spiders_project.jobs.submit import JobSpec, submit_call, submit_script
from spiders_project.keys import RedisKeys
from spiders_project.politeness.steered import steer_host
from spiders_project.redis_access import RedisState, SyncRedisCalls
from spiders_project.worker.heartbeat import StatsPublishConfig, publish_call, publish_script
from tests.support.monitoring import Exporter
from tests.support.services import RedisServer

K = RedisKeys("distributed")
SEEN = SeenConfig("exact", 1, 0.5)
# The pages timed, by name: the job's, the host's and the search's are filled in by fill().
PAGES = (
    "/",
    "/jobs",
    "/jobs/{job}",
    "/hosts",
    "/hosts?q={search}",
    "/hosts/{host}",
    "/deadletters",
    "/workers",
)
BUDGET_MS = 300.0


def calls_of(r: redis.Redis) -> SyncRedisCalls:
    state = RedisState("redis://bench", 0.01, 0.1, logging.getLogger("bench"))
    return SyncRedisCalls(r, state)


def host_name(n: int) -> str:
    return f"h{n}.example"


def fill(r: redis.Redis, hosts: int, jobs: int, *, workers: int = 20) -> dict[str, str]:
    """Fill ``r`` as a crawl of ``hosts`` hosts and ``jobs`` jobs would; the names
    of a job and a host the pages are timed on."""
    calls = calls_of(r)
    scripts = FrontierScripts()
    names = [f"job-{n:04d}" for n in range(jobs)]
    for name in names:
        spec = JobSpec(name, (f"http://{host_name(names.index(name))}/",), max_pages=1000)
        keys, args = submit_call(K, spec, "run1", events_max=10_000)
        calls.script(submit_script(), keys, args)
    batch: list[tuple[str, str, int, bytes]] = []

    def flush() -> None:
        keys, args = enqueue_call(K, batch)
        calls.script(scripts.enqueue, keys, args)
        batch.clear()

    for n in range(hosts):
        host = host_name(n)
        for page in (1, 2):
            url = f"http://{host}/p/{page}"
            job = names[(n * 2 + page) % jobs]
            payload = serialize.dumps({"url": url, "meta": {"crawl_job": job, "depth": 1}})
            token = SEEN.token(hashlib.sha1(url.encode()).digest())
            batch.append((host, token, 0 if page == 1 else 5, payload))
        if len(batch) >= 2000:
            flush()
    if batch:
        flush()
    # Downloads in flight, hosts at their cap (as lease.lua leaves them).
    with r.pipeline(transaction=False) as pipe:
        for n in range(0, min(hosts, 3000), 10):
            pipe.hincrby(K.in_flight, host_name(n), 2)
        for n in range(0, min(hosts, 500), 10):
            pipe.hset(K.cap_waiters, host_name(n), "w1 w2")
            pipe.zrem(K.hosts, host_name(n))
        pipe.execute()
    # A few hundred hosts steered by an operator, blocked ones among them.
    for n in range(5, min(hosts, 2000), 10):
        steer_host(calls, K, host_name(n), delay="2.0", cap="1", blocked=n % 50 == 5, purge=False)
    # Dead letters, from the frontier's own entries.
    letters = []
    for n in range(5000):
        payload = serialize.dumps({"url": f"http://{host_name(n)}/dead/{n}"})
        letters.append(
            make_dead_letter(
                payload,
                error=("HTTP 503", "TimeoutError", "DNSLookupError")[n % 3],
                attempts=3,
                failed_at=datetime.now(UTC),
                worker="bench:1",
            ).dumps()
        )
    r.lpush(K.dead, *letters)
    # Workers publishing their stats (a heartbeat, samples of the pages total).
    config = StatsPublishConfig(5.0, 15.0, 900.0, 300.0, 60.0, 3600.0)
    for w in range(workers):
        stats = {"response_received_count": 1000 * w, "item_scraped_count": 900 * w}
        stats |= {f"downloader/response_status_count/{s}": 10 for s in (200, 404, 503)}
        stats |= {"worker/role": "all", "render/pages": 7, "playwright/page_count": 3}
        keys, args = publish_call(
            K, f"bench:{w}", "run", first=True, state="running", config=config, stats=stats
        )
        calls.script(publish_script(), keys, args)
    # A part of a name some hosts share: h5000 finds h5000 and h50000 ... h50009.
    search = host_name(hosts // 20).split(".")[0]
    return {"job": names[len(names) // 2], "host": host_name(hosts // 2), "search": search}


def time_sweep(r: redis.Redis) -> list[str]:
    """The sweep's cost, unpaced, in this process: one pass over every host, and
    the hosts page's live reads without and with the pass's busiest."""
    send = functools.partial(calls_of(r).pipelined, retry=False)
    sweep = SweepPass(send, K)
    steps: list[float] = []
    began = time.perf_counter()
    while not sweep.done:
        started = time.perf_counter()
        sweep.step()
        steps.append((time.perf_counter() - started) * 1000)
    took = time.perf_counter() - began
    result = sweep.result()
    lines = [
        f"a pass, unpaced: {result.hosts} hosts in {took:.1f} s, {len(steps)} steps, "
        f"{statistics.median(steps):.1f} ms a step (median), {max(steps):.1f} ms at worst"
    ]
    for label, also in (("alone", []), ("with the pass's busiest", [h for h, _ in result.top])):
        times = []
        for _ in range(10):
            started = time.perf_counter()
            view = read_hosts(send, K, also)
            times.append((time.perf_counter() - started) * 1000)
        lines.append(
            f"the hosts page's live reads {label}: {view.candidates} hosts, "
            f"{statistics.median(times):.1f} ms (median of 10)"
        )
    return lines


def commands_sent(r: redis.Redis) -> dict[str, int]:
    return {
        name.removeprefix("cmdstat_"): int(value["calls"])
        for name, value in r.info("commandstats").items()
    }


class Browser:
    """A logged-in HTTP client of the console (a cookie jar)."""

    def __init__(self, base: str, user: str, password: str) -> None:
        self.base = base
        self.opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar())
        )
        data = urllib.parse.urlencode({"username": user, "password": password}).encode()
        with self.opener.open(f"{base}/login", data=data, timeout=30) as response:
            assert response.status == 200 and "/login" not in response.url, response.url

    def get(self, path: str) -> tuple[int, bytes, float]:
        started = time.perf_counter()
        with self.opener.open(self.base + path, timeout=30) as response:
            body = response.read()
            return response.status, body, (time.perf_counter() - started) * 1000


def wait_for_sweep(browser: Browser, timeout: float) -> float:
    """Seconds until the hosts page says the sweep's first pass has ended."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if b"ranked by the sweep of all" in browser.get("/hosts")[1]:
            return time.monotonic() - started
        time.sleep(1.0)
    raise AssertionError(f"the sweep's first pass did not end in {timeout:.0f} s")


def time_pages(browser: Browser, named: dict[str, str], rounds: int) -> dict[str, list[float]]:
    """Milliseconds of each page, whole and live, ``rounds`` times each."""
    times: dict[str, list[float]] = {}
    for page in PAGES:
        path = page.format(**named)
        for variant in (path, path + ("&" if "?" in path else "?") + "live=1"):
            browser.get(variant)  # a first read warms nothing up in Redis, but the templates
            for _ in range(rounds):
                status, body, ms = browser.get(variant)
                assert status == 200, (variant, status)
                if variant.endswith("live=1"):
                    assert "error" not in json.loads(body), body[:300]
                times.setdefault(variant, []).append(ms)
    return times


def report(times: dict[str, list[float]]) -> list[str]:
    lines = [f"{'page':<36} {'median ms':>10} {'worst ms':>10}"]
    for page, values in times.items():
        lines.append(f"{page:<36} {statistics.median(values):>10.1f} {max(values):>10.1f}")
    return lines


@contextmanager
def console_on(r_url: str, folder: Path) -> Iterator[Exporter]:
    htpasswd = folder / "htpasswd"
    htpasswd.write_text(f"bench:{bcrypt.hashpw(b'bench', bcrypt.gensalt(5)).decode()}\n")
    exporter = Exporter(r_url, folder, f"CONSOLE_HTPASSWD={htpasswd}", "CONSOLE_OPERATORS=bench")
    try:
        yield exporter
    finally:
        exporter.close()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.bench.console_pages")
    parser.add_argument("--hosts", type=int, default=100_000)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=20)
    opts = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="console-bench-"))
    server = RedisServer(datadir=folder / "redis")
    try:
        r = redis.Redis.from_url(server.url)
        started = time.monotonic()
        named = fill(r, opts.hosts, opts.jobs)
        print(
            f"filled in {time.monotonic() - started:.0f} s: {r.zcard(K.hosts)} hosts in the "
            f"ready-set, {r.get(K.requests_size).decode()} requests queued, "
            f"{r.hlen(K.jobs)} jobs, {r.dbsize()} keys"
        )
        print("\n".join(time_sweep(r)))
        with console_on(server.url, folder) as exporter:
            base = exporter.url.removesuffix("/metrics")
            browser = Browser(base, "bench", "bench")
            swept = wait_for_sweep(browser, opts.hosts / 500 + 60)
            print(f"the sweep's first pass ended {swept:.0f} s after the first page")
            before = commands_sent(r)
            times = time_pages(browser, named, opts.rounds)
            after = commands_sent(r)
        print("\n".join(report(times)))
        sent = {c: after[c] - before.get(c, 0) for c in after if after[c] != before.get(c, 0)}
        label = "commands sent while timing (the pages', the sweep's: ZSCAN, HSCAN, ZCARD, LLEN)"
        print(label, json.dumps(dict(sorted(sent.items()))))
    finally:
        server.stop()


if __name__ == "__main__":
    main()
