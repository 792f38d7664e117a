"""Rendering: the rules and bookkeeping, then real Chromium, a real Redis and real workers."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import datetime

import psutil
import pytest
from playwright.async_api import async_playwright

from spiders_project.config import ConfigError, load_settings
from spiders_project.rendering.blocking import ResourceBlocker, with_switches
from spiders_project.rendering.config import RenderConfig, parse_rules
from spiders_project.rendering.page_interception import RouteSwitch
from spiders_project.rendering.recycle import Recycler
from spiders_project.rendering.rules import RenderRules
from tests.support.processes import K, stat, worker
from tests.support.site import TRACKER_HOST, JsSite

BROWSER_NAMES = ("chromium", "chrome", "headless_shell")


def config(**overrides) -> RenderConfig:
    return RenderConfig.from_settings(load_settings(overrides))


# --- settings, rules, blocking, recycling -----------------------------------------------
def test_defaults_are_valid_and_bad_values_name_their_setting():
    cfg = config()
    assert cfg.enabled and cfg.concurrency >= 1 and cfg.rules == ()
    assert {"image", "font", "media"} <= cfg.block_resource_types
    assert not cfg.images_unloaded  # blocked images are aborted: they fire "error"
    options = load_settings().getdict("PLAYWRIGHT_LAUNCH_OPTIONS")
    assert options["executable_path"] and options["headless"] is True
    for overrides, name in (
        ({"RENDER_WAIT_UNTIL": "idle"}, "RENDER_WAIT_UNTIL"),
        ({"RENDER_TIMEOUT": 10, "RENDER_DEADLINE": 15}, "RENDER_DEADLINE"),
        ({"RENDER_CONCURRENCY": 0}, "RENDER_CONCURRENCY"),
        ({"RENDER_PAGES_PER_CONTEXT": 10, "RENDER_PAGES_PER_BROWSER": 5}, "RENDER_PAGES_PER_"),
        ({"RENDER_URL_PATTERNS": '["(unclosed"]'}, "RENDER_URL_PATTERNS"),
    ):
        with pytest.raises(ConfigError, match=name):
            config(**overrides)


def test_which_requests_render():
    rules = RenderRules(parse_rules({r"/app/": "#root", r"\.example/js/": None}))
    shop = "https://shop.example/app/1"
    assert rules.decide("https://a.example/", {}) == (False, None)
    assert rules.decide(shop, {}) == (True, "#root")
    assert rules.decide("https://a.example/js/x", {}) == (True, None)
    # Meta wins over patterns, both ways; a selector in meta wins over the pattern's.
    assert rules.decide(shop, {"render": False}) == (False, None)
    assert rules.decide("https://a.example/", {"render": True}) == (True, None)
    assert rules.decide("https://a.example/", {"playwright": True}) == (True, None)
    assert rules.decide(shop, {"render_wait_selector": "#x"}) == (True, "#x")
    # Comma-separated or JSON on the command line.
    assert len(config(RENDER_URL_PATTERNS=r'["a{1,2}", "b"]').rules) == 2
    assert len(config(RENDER_URL_PATTERNS="/a/,/b/").rules) == 2


def test_resource_blocker():
    blocker = ResourceBlocker({"image", "font"}, ["doubleclick.net", ".tracker.localhost"])
    assert blocker.blocks("https://x.example/a.png", "image")
    assert blocker.blocks("https://ad.g.doubleclick.net/x.js", "script")
    assert blocker.blocks("http://tracker.localhost:8000/t.js", "script")
    assert not blocker.blocks("https://notdoubleclick.net/x.js", "script")
    assert not blocker.blocks("https://x.example/app.js", "script")
    assert not ResourceBlocker([], [])


def test_blocked_fonts_and_unloaded_images_become_chromium_switches():
    # Blocked images stay with the route (they fire "error") unless unloaded.
    assert with_switches(["--mute-audio"], ["image", "font", "media"]) == [
        "--mute-audio",
        "--disable-remote-fonts",
    ]
    args = with_switches(["--mute-audio"], ["font"], images_unloaded=True)
    assert args[:2] == ["--mute-audio", "--disable-remote-fonts"]
    # Playwright's own blink settings come first: Chromium keeps the last --blink-settings.
    assert args[2].startswith("--blink-settings=primaryHoverType=2,")
    assert args[2].endswith(",imagesEnabled=false")
    assert with_switches(["--blink-settings=a=1"], [], images_unloaded=True) == [
        "--blink-settings=a=1,imagesEnabled=false"
    ]
    assert with_switches(args, ["font"], images_unloaded=True) == args  # idempotent
    assert with_switches(["--mute-audio"], ["media", "stylesheet"]) == ["--mute-audio"]


def test_recycler_hands_out_generations_and_says_what_to_close():
    recycler = Recycler(pages_per_context=2, pages_per_browser=5)
    a, b = recycler.acquire(), recycler.acquire()
    c = recycler.acquire()
    assert a == b != c  # the third page opens a new context
    assert recycler.release(a) is False  # b is still on it
    assert recycler.release(b) is True  # retired and unused: close it
    assert recycler.release(c) is False and recycler.drained.is_set()
    recycler.acquire(), recycler.acquire()
    assert recycler.browser_due()
    recycler.browser_restarted()
    assert not recycler.browser_due()


# --- real Chromium -----------------------------------------------------------------------
async def _visit(
    site: JsSite, blocker: ResourceBlocker, route: bool = True
) -> tuple[str, list[str], bool]:
    """The site's first page in Chromium with the default launch options, the
    switches for ``blocker``'s resource types and ``blocker`` as route handler
    (or, with ``route=False``, Chromium's switches alone): its title, its links
    and whether its images are complete (loaded or failed)."""
    options = load_settings().getdict("PLAYWRIGHT_LAUNCH_OPTIONS")
    # As the handler does; without the route, images are left unloaded instead.
    images_unloaded = not route and "image" in blocker.resource_types
    options["args"] = with_switches(
        options["args"], blocker.resource_types, images_unloaded=images_unloaded
    )
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(**options)
        page = await browser.new_page()

        async def abort_blocked(route):
            await (route.abort() if blocker(route.request) else route.continue_())

        if route:
            await page.route("**", abort_blocked)
        await page.goto(site.url, wait_until="load")
        await page.wait_for_load_state("networkidle")
        title = await page.title()
        links = await page.eval_on_selector_all("a", "els => els.map(a => a.href)")
        # Images left unloaded are still in the DOM; Playwright's desktop
        # pointer settings survive our --blink-settings.
        assert await page.eval_on_selector_all("img", "els => els.length") == site.images
        assert await page.evaluate("matchMedia('(hover: hover) and (pointer: fine)').matches")
        complete = await page.eval_on_selector_all("img", "els => els.every(i => i.complete)")
        await browser.close()
    return title, links, complete


def test_launch_options_start_debian_chromium_and_blocking_keeps_requests_off_the_wire():
    with JsSite(pages=3) as site:
        title, links, complete = asyncio.run(
            _visit(site, ResourceBlocker(["image", "font"], [TRACKER_HOST]))
        )
        assert title == "JS page 0" and complete  # aborted images failed: "error" fired
        assert set(links) == {site.page_url(1), site.page_url(2)}
        assert site.count("/img/") == site.count("/font/") == 0
        assert site.count("/t.js", host=TRACKER_HOST) == 0
        # Images and fonts unloaded by Chromium's switches alone, without the route
        # (RENDER_IMAGES_UNLOADED): the images never complete, hence off by default.
        _, _, complete = asyncio.run(
            _visit(site, ResourceBlocker(["image", "font"], []), route=False)
        )
        assert not complete
        assert site.count("/img/") == site.count("/font/") == 0
        assert site.count("/t.js", host=TRACKER_HOST) == 1
        # Unblocked, the same page asks for all three (*.localhost is this machine).
        asyncio.run(_visit(site, ResourceBlocker([], [])))
        assert site.count("/img/") == site.count("/font/") == 1
        assert site.count("/t.js", host=TRACKER_HOST) == 2


async def _two_urls_on_one_page(site: JsSite) -> tuple[list[str], dict[str, list[str]], str]:
    """Pages 1 and 2 of the site on one page with a RouteSwitch, as scrapy-playwright
    routes a reused page: unroute("**") and route("**", handler) per URL."""
    options = load_settings().getdict("PLAYWRIGHT_LAUNCH_OPTIONS")
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(**options)
        page = await browser.new_page()
        installed: list[str] = []  # routes that reached Playwright
        playwright_route = page.route

        async def counted(url, handler, **kwargs):
            installed.append(url)
            return await playwright_route(url, handler, **kwargs)

        page.route = counted  # type: ignore[method-assign]
        RouteSwitch.install(page)
        seen: dict[str, list[str]] = {}
        for n in (1, 2):
            name = f"handler {n}"
            seen[name] = []

            async def handler(route, request, urls=seen[name]):
                urls.append(request.url)
                await route.continue_()

            await page.unroute("**")
            await page.route("**", handler)
            await page.goto(site.page_url(n), wait_until="load")
            await page.wait_for_load_state("networkidle")
        await page.route("**/nothing", handler)  # another pattern: Playwright's own
        await page.unroute_all()  # ours removed too: installed again by the next route
        await page.route("**", handler)
        title = await page.title()
        await browser.close()
    return installed, seen, title


def test_a_reused_page_keeps_one_route_and_swaps_its_handler_per_url():
    with JsSite(pages=3) as site:
        installed, seen, title = asyncio.run(_two_urls_on_one_page(site))
    assert installed == ["**", "**/nothing", "**"]
    assert title == "JS page 2"
    for n in (1, 2):
        urls = seen[f"handler {n}"]
        assert site.page_url(n) in urls and f"{site.url.rstrip('/')}/api/page/{n}" in urls
        assert not any(f"/page/{3 - n}" in u for u in urls)


# --- real workers ------------------------------------------------------------------------
def descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def test_http_only_worker_never_starts_the_driver_or_chromium(redis_url, r, tmp_path, procs):
    with JsSite(plain_pages=40) as site:
        r.lpush(K.start_urls, site.page_url(0, "plain"))
        w = worker("w", redis_url, tmp_path, "MAX_IDLE_TIME_BEFORE_CLOSE=2")
        procs.append(w)
        children: set[str] = set()
        while w.poll() is None:
            children |= {p.name() for p in descendants(w.pid) if p.is_running()}
            time.sleep(0.1)
        assert w.wait(5) == 0, w.log()[-3000:]
        assert r.llen(K.items) == 40
        # Scrapy's start-up line "Versions: ... Platform" runs `uname -p`
        # (platform.platform()), and croniter's import (the jobs' schedules)
        # runs `file` (platform.architecture()): children a 0.1 s poll catches
        # now and then; neither is a driver or browser. Any other child fails.
        assert children - {"uname", "file"} == set()
        assert "Playwright driver" not in w.log()
        assert site.count("/api/plain/") == 0


def test_render_disabled_fetches_everything_over_http(redis_url, r, tmp_path, procs):
    with JsSite(pages=3) as site:
        r.lpush(K.start_urls, json.dumps({"url": site.url, "meta": {"playwright": True}}))
        w = worker("w", redis_url, tmp_path, "MAX_IDLE_TIME_BEFORE_CLOSE=2", "RENDER_ENABLED=False")
        procs.append(w)
        assert w.wait(60) == 0, w.log()[-3000:]
        items = [json.loads(i)["item"] for i in r.lrange(K.items, 0, -1)]
        assert [(i["title"], i["rendered"]) for i in items] == [("Loading", False)]
        assert site.count("/api/") == 0
    log = w.log()
    assert log.count("RENDER_ENABLED is off") == 1 and "Playwright driver" not in log


def test_rules_concurrency_cap_and_recycling_in_a_worker(redis_url, r, tmp_path, procs):
    """Meta-rendered tree, pattern-rendered pages waiting for a selector, plain pages."""
    with JsSite(pages=11, plain_pages=20, slow_pages=4) as site:
        patterns = json.dumps({r"/slow/\d+$": "#content"})
        idle_only = site.page_url(3, "slow") + "?v=idle"  # renders, but no selector
        r.lpush(
            K.start_urls,
            json.dumps({"url": site.url, "meta": {"playwright": True}}),
            site.page_url(0, "slow"),
            json.dumps({"url": idle_only, "meta": {"render": True}}),
            site.page_url(0, "plain"),
        )
        w = worker(
            "w",
            redis_url,
            tmp_path,
            "MAX_IDLE_TIME_BEFORE_CLOSE=2",
            f"RENDER_URL_PATTERNS={patterns}",
            "RENDER_CONCURRENCY=2",
            "RENDER_PAGES_PER_CONTEXT=3",
            "RENDER_PAGES_PER_BROWSER=7",
            "RENDER_URLS_PER_PAGE=2",
            "RENDER_IDLE_PAGE_CLOSE=0.5",
            f"RENDER_BLOCK_DOMAINS={TRACKER_HOST}",
        )
        procs.append(w)
        assert w.wait(120) == 0, w.log()[-3000:]
        items = {i["url"]: i["item"] for i in map(json.loads, r.lrange(K.items, 0, -1))}
        hits = site.hits()
    log = w.log()
    rendered = site.js_urls() | site.slow_urls() | {idle_only}
    assert set(items) == rendered | site.plain_urls()
    assert {u for u, i in items.items() if i["rendered"]} == rendered
    for n in range(11):
        assert items[site.page_url(n)]["title"] == f"JS page {n}"
    for n in range(4):  # the pattern's selector waited for content fetched 1.5 s late
        assert items[site.page_url(n, "slow")]["title"] == f"Slow page {n}"
    assert items[idle_only]["title"] == "Loading"  # network idle came first
    for n in range(20):
        assert items[site.page_url(n, "plain")]["title"] == f"Plain {n}"
    # Plain pages never ran a script; rendered ones fetched nothing blocked.
    assert site.count("/api/plain/") == 0
    assert site.count("/img/") == site.count("/font/") == 0
    assert not any(h == TRACKER_HOST for h, _ in hits)
    # Plain HTTP was not queued behind the browser: all plain pages were done
    # before the third rendered page.
    times = sorted(datetime.fromisoformat(i["fetched_at"]) for i in items.values() if i["rendered"])
    plain_done = max(
        datetime.fromisoformat(i["fetched_at"]) for i in items.values() if not i["rendered"]
    )
    assert plain_done < times[2]
    assert stat(r, w, "render/max_concurrent") == 2
    assert stat(r, w, "render/pages") == len(rendered)
    # Every navigation reached the route handler; no page event was subscribed to.
    assert stat(r, w, "render/browser_requests") >= len(rendered)
    assert stat(r, w, "playwright/request_count") == 0
    # 16 pages at 3 per context and 7 per browser.
    assert stat(r, w, "render/browser_restarts") == 2
    assert stat(r, w, "playwright/browser_count") == 3
    assert stat(r, w, "render/contexts_recycled") >= 4
    # Pages were reused (up to 2 URLs each), in their own context only: every
    # rendered URL had a page opened for it or was a page's second one.
    opened, reused = stat(r, w, "playwright/page_count"), stat(r, w, "render/pages_reused")
    assert reused >= 1 and opened + reused == len(rendered), (opened, reused)
    assert stat(r, w, "render/idle_pages_closed") >= 1  # the 2 s idle before closing
    assert stat(r, w, "render/garbage_collections") >= 1  # while pages waited
    assert "Traceback" not in log


def test_rendered_pages_keep_the_cluster_wide_host_delay(redis_url, r, tmp_path, procs):
    """Pages waiting for the browser wait before their host's turn, not after it."""
    with JsSite(pages=10) as site:
        host = f"127.0.0.1:{site.port}"
        r.lpush(K.start_urls, json.dumps({"url": site.url, "meta": {"playwright": True}}))
        w = worker(
            "w",
            redis_url,
            tmp_path,
            "MAX_IDLE_TIME_BEFORE_CLOSE=2",
            f"HOST_DOWNLOAD_DELAYS={json.dumps({host: 0.3})}",
            "RENDER_CONCURRENCY=2",
            f"RENDER_BLOCK_DOMAINS={TRACKER_HOST}",
        )
        procs.append(w)
        assert w.wait(120) == 0, w.log()[-3000:]
        pages = [t for t, h, path in site.request_log() if path == "/" or path.startswith("/page/")]
    assert r.llen(K.items) == len(pages) == 10
    gaps = [b - a for a, b in zip(pages, pages[1:], strict=False)]
    assert min(gaps) >= 0.3, sorted(gaps)[:3]
