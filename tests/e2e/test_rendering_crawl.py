"""Whole crawls of JavaScript pages: real workers, Chromium, db_writer and Redis."""

from __future__ import annotations

import json
import signal
import sqlite3
import time

import psutil
import pytest

from tests.support.processes import K, db_writer, items_drained, stat, wait_until, worker
from tests.support.site import TRACKER_HOST, JsSite

pytestmark = pytest.mark.slow
BROWSER_NAMES = ("chromium", "chrome", "headless_shell")
BLOCK_TEST_TRACKER = f"RENDER_BLOCK_DOMAINS={TRACKER_HOST}"


def stored(db_path) -> dict[str, dict]:
    if not db_path.exists():
        return {}
    with sqlite3.connect(db_path) as db:
        try:
            return {
                url: json.loads(data) for url, data in db.execute("SELECT url, data FROM items")
            }
        except sqlite3.OperationalError:  # the db_writer has not created it yet
            return {}


def browser_processes(pid: int) -> list[psutil.Process]:
    """Chromium processes under the worker ``pid`` (its Playwright driver's children)."""
    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    found = []
    for child in children:
        try:
            if any(name in child.name() for name in BROWSER_NAMES):
                found.append(child)
        except psutil.NoSuchProcess:
            pass
    return found


def driver_process(pid: int) -> list[psutil.Process]:
    """Playwright's Node driver under the worker ``pid``."""
    return [p for p in psutil.Process(pid).children() if p.name().startswith("node")]


def finish(r, writer, workers) -> None:
    for w in workers:
        assert w.wait(180) == 0, w.log()[-3000:]
    wait_until(lambda: items_drained(r), 60, what="the item buffer to drain")
    assert writer.stop(30) == 0, writer.log()[-3000:]


def test_rendered_titles_and_js_links_land_in_the_database(redis_url, r, tmp_path, procs):
    db_path = tmp_path / "items.db"
    with JsSite(pages=15, plain_pages=5, slow_pages=1) as site:
        slow = {"playwright": True, "render_wait_selector": "#content"}
        r.lpush(
            K.start_urls,
            json.dumps({"url": site.url, "meta": {"playwright": True}}),
            json.dumps({"url": site.page_url(0, "slow"), "meta": slow}),
            site.page_url(0, "plain"),
        )
        w = worker("w", redis_url, tmp_path, "MAX_IDLE_TIME_BEFORE_CLOSE=2", BLOCK_TEST_TRACKER)
        writer = db_writer("dbw", redis_url, f"sqlite:///{db_path}", tmp_path)
        procs += [w, writer]
        finish(r, writer, [w])
        items = stored(db_path)
        # Every JS page was reached through links that only a script added,
        # and each was rendered once.
        assert set(items) == site.js_urls() | site.slow_urls() | site.plain_urls()
        for n in range(15):
            assert site.hits()[("127.0.0.1", f"/api/page/{n}")] == 1
        assert site.count("/api/plain/") == 0
        assert site.count("/img/") == 0
    for n in range(15):
        page = items[site.page_url(n)]
        assert (page["title"], page["rendered"]) == (f"JS page {n}", True)
    slow_item = items[site.page_url(0, "slow")]
    assert (slow_item["title"], slow_item["rendered"]) == ("Slow page 0", True)
    for n in range(5):
        plain = items[site.page_url(n, "plain")]
        assert (plain["title"], plain["rendered"]) == (f"Plain {n}", False)
    log = w.log()
    assert "Traceback" not in log and "Deprecat" not in log


def test_sigkill_of_chromium_or_its_driver_mid_crawl_loses_no_page(redis_url, r, tmp_path, procs):
    db_path = tmp_path / "items.db"
    with JsSite(pages=40, plain_pages=0, api_latency=0.3) as site:
        r.lpush(K.start_urls, json.dumps({"url": site.url, "meta": {"playwright": True}}))
        w = worker("w", redis_url, tmp_path, "MAX_IDLE_TIME_BEFORE_CLOSE=2", BLOCK_TEST_TRACKER)
        writer = db_writer("dbw", redis_url, f"sqlite:///{db_path}", tmp_path)
        procs += [w, writer]
        # Chromium twice, and in between Playwright's Node driver (Chromium goes with it).
        for progress, target in (
            (8, browser_processes),
            (16, driver_process),
            (24, browser_processes),
        ):
            wait_until(
                lambda n=progress: r.llen(K.items) + len(stored(db_path)) >= n,
                120,
                what=f"{progress} pages",
            )
            victims = target(w.pid)
            assert victims, f"no {target.__name__} under the worker"
            for p in victims:
                try:
                    p.send_signal(signal.SIGKILL)
                except psutil.NoSuchProcess:
                    pass
        finish(r, writer, [w])
        items = stored(db_path)
        assert set(items) == site.js_urls()
    assert all(i["rendered"] and i["title"].startswith("JS page") for i in items.values())
    log = w.log()
    assert log.count("Chromium exited unexpectedly") == 2
    assert log.count("Playwright's driver exited unexpectedly") == 1
    assert stat(r, w, "render/browser_crashes") == 2
    assert stat(r, w, "render/driver_restarts") == 1
    assert stat(r, w, "playwright/browser_count") == 4
    assert r.llen(K.dead) == 0


def test_pages_that_never_finish_are_retried_then_dead_lettered(redis_url, r, tmp_path, procs):
    """/hang never fires load (Playwright's timeout); /busy spins after load (our deadline)."""
    with JsSite(pages=3) as site:
        r.lpush(
            K.start_urls,
            *(
                json.dumps({"url": url, "meta": {"playwright": True}})
                for url in (site.url + "hang", site.url + "busy", site.url)
            ),
        )
        w = worker(
            "w",
            redis_url,
            tmp_path,
            "MAX_IDLE_TIME_BEFORE_CLOSE=2",
            "RETRY_TIMES=1",
            "RENDER_TIMEOUT=2",
            "RENDER_IDLE_TIMEOUT=1",
            "RENDER_DEADLINE=5",
            BLOCK_TEST_TRACKER,
        )
        procs.append(w)
        seen: set[psutil.Process] = set()
        started = time.monotonic()
        while w.poll() is None and time.monotonic() - started < 120:
            seen.update(browser_processes(w.pid))
            time.sleep(0.2)
        assert w.wait(5) == 0, w.log()[-3000:]
        dead = {d["url"]: d for d in map(json.loads, r.lrange(K.dead, 0, -1))}
        items = {json.loads(i)["url"] for i in r.lrange(K.items, 0, -1)}
        assert items == site.js_urls()
        hits = site.hits()
    assert set(dead) == {site.url + "hang", site.url + "busy"}
    assert dead[site.url + "hang"]["error"].startswith("TimeoutError: Page.goto: Timeout 2000ms")
    assert dead[site.url + "busy"]["error"].startswith("RenderTimeout: ")
    for path in ("/hang", "/busy"):
        assert dead[site.url + path[1:]]["attempts"] == 2
        assert hits[("127.0.0.1", path)] == 2
    # The requests kept in the dead list are JSON the frontier can take back.
    assert all(d["request"]["m"]["render"] is True for d in dead.values())
    # Nothing of the browser outlives the worker.
    assert seen and not [p for p in seen if p.is_running() and p.status() != "zombie"]


def test_a_browser_over_its_memory_bound_is_restarted_and_loses_no_page(
    redis_url, r, tmp_path, procs
):
    """RENDER_MAX_RSS_MB: pages that hold 500 MB each push Chromium past a bound
    set just above what this machine's Chromium takes for ordinary pages
    (measured first, in the same test); the browser restarts once its pages in
    flight are done, and every page is stored."""
    db_path = tmp_path / "items.db"
    settings = ("MAX_IDLE_TIME_BEFORE_CLOSE=2", BLOCK_TEST_TRACKER, "RENDER_CONCURRENCY=2")
    leaks = {"RENDER_URL_PATTERNS": json.dumps({"/leak/": "#content"})}
    with JsSite(pages=6, plain_pages=0, slow_pages=0, leak_pages=4, leak_mb=500) as site:
        # Ordinary pages first, measured (a bound far above them).
        r.lpush(K.start_urls, json.dumps({"url": site.url, "meta": {"playwright": True}}))
        measure = worker("w1", redis_url, tmp_path, *settings, "RENDER_MAX_RSS_MB=100000")
        writer = db_writer("dbw", redis_url, f"sqlite:///{db_path}", tmp_path)
        procs += [measure, writer]
        assert measure.wait(120) == 0, measure.log()[-3000:]
        ordinary = stat(r, measure, "render/max_browser_rss_mb")
        assert ordinary > 0 and stat(r, measure, "render/browser_restarts") == 0

        bound = ordinary + 250
        r.lpush(K.start_urls, site.page_url(0, "leak"))
        leaky = worker(
            "w2",
            redis_url,
            tmp_path,
            *settings,
            f"RENDER_MAX_RSS_MB={bound}",
            f"RENDER_URL_PATTERNS={leaks['RENDER_URL_PATTERNS']}",
        )
        procs.append(leaky)
        finish(r, writer, [leaky])
        items = stored(db_path)
        assert set(items) == site.js_urls() | site.leak_urls()
        for n in range(4):
            assert items[site.page_url(n, "leak")]["title"] == f"Leak page {n}"
    assert stat(r, leaky, "render/browser_restarts/memory") >= 1
    assert stat(r, leaky, "render/max_browser_rss_mb") > bound
    log = leaky.log()
    assert "Restarting Chromium: its processes use" in log and "Traceback" not in log
    assert r.llen(K.dead) == 0
