"""The console in a real browser (Playwright and Debian's Chromium) on a real crawl.

Two ``scrapy crawl`` workers crawl the test site for two jobs; an operator
pauses, resumes and cancels one job from its row and slows a host of the
other, and the site's own request log is the judge: each change takes effect
within 2 s. A viewer sees the same pages with every action disabled, and is
refused (403) when she posts anyway; a request without the CSRF token is
refused too. With ``CONSOLE_SCREENSHOTS=docs/console`` the crawl test writes
the screenshots docs/OPERATIONS.md shows (overview, jobs, host).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from tests.support.console import console
from tests.support.processes import ROOT, K, wait_until, worker
from tests.support.site import TestSite
from tests.support.wild import spacing_faults

pytestmark = pytest.mark.slow

# What the test grants a change to take effect, as the operator is promised.
WITHIN = 2.0
USERS = {"alice": "alice-pw", "bob": "bob-pw"}
LAUNCH = {
    "executable_path": "/usr/bin/chromium",
    "headless": True,
    "args": [
        "--no-sandbox",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--disable-gpu",
    ],
}


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(**LAUNCH)
        yield chromium
        chromium.close()


@pytest.fixture
def exporters():
    started: list = []
    yield started
    for e in started:
        e.close()


def start_console(redis_url: str, tmp_path: Path, exporters: list) -> str:
    exporter = console(
        redis_url,
        tmp_path,
        "CONSOLE_OPERATORS=alice",
        f"CONSOLE_REDIS_URL={redis_url}",
        **USERS,
    )
    exporters.append(exporter)
    return exporter.url.removesuffix("/metrics")


def log_in(browser: Browser, base: str, user: str) -> Page:
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(base + "/")
    page.fill('input[name="username"]', user)
    page.fill('input[name="password"]', USERS[user])
    page.click('button:has-text("Log in")')
    expect(page.locator("#user")).to_have_text(user)
    return page


def screenshot(page: Page, name: str) -> None:
    folder = os.environ.get("CONSOLE_SCREENSHOTS")
    if folder:
        path = ROOT / folder / f"{name}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(path), full_page=True)


def state_of(r, job: str) -> str:
    return json.loads(r.hget(K.jobs, job))["state"]


def test_login_a_viewer_who_cannot_act_and_a_request_without_csrf(
    browser, r, redis_url, tmp_path, exporters
):
    base = start_console(redis_url, tmp_path, exporters)
    # A wrong password: the form again, with why.
    page = browser.new_page()
    page.goto(base + "/jobs")
    assert page.url.startswith(base + "/login")
    page.fill('input[name="username"]', "alice")
    page.fill('input[name="password"]', "not-her-password")
    page.click('button:has-text("Log in")')
    expect(page.get_by_role("alert")).to_contain_text("Wrong user name or password")
    page.close()
    # The operator submits a job from the form.
    alice = log_in(browser, base, "alice")
    alice.goto(base + "/jobs")
    alice.fill('input[name="id"]', "news")
    alice.fill('textarea[name="urls"]', "http://news.test/\nhttp://news.test/b")
    alice.click('button:has-text("Submit")')
    expect(alice.locator(".flash.ok")).to_contain_text("Job news submitted")
    row = alice.locator('tr[data-job="news"]')
    expect(row.get_by_role("button", name="Pause")).to_be_enabled()
    # The viewer sees the job, and no enabled control.
    bob = log_in(browser, base, "bob")
    bob.goto(base + "/jobs")
    expect(bob.locator(".role")).to_contain_text("viewer")
    row = bob.locator('tr[data-job="news"]')
    for name in ("Pause", "Resume", "Cancel"):
        expect(row.get_by_role("button", name=name)).to_be_disabled()
    expect(bob.get_by_role("button", name="Submit")).to_be_disabled()
    # Posting anyway (the page's own token): 403, and the job runs on.
    token = bob.locator('input[name="csrf"]').first.get_attribute("value")
    refused = bob.request.post(base + "/jobs/news/pause", form={"csrf": token or ""})
    assert refused.status == 403
    assert state_of(r, "news") == "running"
    # The operator's session without the token: 403 too.
    refused = alice.request.post(base + "/jobs/news/pause", form={"spider": "distributed"})
    assert refused.status == 403
    assert state_of(r, "news") == "running"
    # No script runs inline: the page's only script is the static file.
    scripts = alice.locator("script").evaluate_all("els => els.map(e => e.src || e.text)")
    assert scripts == [base + "/static/console.js"]


def test_an_operator_steers_a_live_crawl_from_the_console(
    browser, r, redis_url, tmp_path, exporters, procs
):
    with TestSite(
        pages=400, seed=40, hosts=3, latency=0.01, offsite_links=False, dead_links=False
    ) as site:
        netlocs = [urlsplit(u).netloc for u in site.urls]
        base = start_console(redis_url, tmp_path, exporters)
        workers = [
            worker(
                f"w{i}",
                redis_url,
                tmp_path,
                "DOWNLOAD_DELAY=0.2",
                "CONCURRENT_REQUESTS=4",
                "ROBOTSTXT_OBEY=false",
                "JOB_FINISH_GRACE=3",
                "MAX_IDLE_TIME_BEFORE_CLOSE=0",
            )
            for i in (1, 2)
        ]
        procs += workers
        wait_until(lambda: r.zcard(K.workers) == 2, 90, what="both workers to start")
        alice = log_in(browser, base, "alice")
        for job, urls in (("A", site.urls[:1]), ("B", site.urls[1:])):
            alice.goto(base + "/jobs")
            alice.fill('input[name="id"]', job)
            alice.fill('textarea[name="urls"]', "\n".join(urls))
            alice.click('button:has-text("Submit")')
            expect(alice.locator(".flash.ok")).to_contain_text(f"Job {job} submitted")

        def times(host: str, after: float = 0.0) -> list[float]:
            return sorted(t for t, h, path, _ in site.request_log() if h == host and t > after)

        wait_until(lambda: len(times(netlocs[0])) >= 10, 60, what="A to fetch 10 pages")

        # Live: the jobs page updates its counts without a reload.
        alice.goto(base + "/jobs")
        alice.evaluate("window.notReloaded = true")
        pages_a = alice.locator('tr[data-job="A"] td.pages')
        first = int(pages_a.inner_text())
        wait_until(lambda: int(pages_a.inner_text()) > first, 10, what="a live update")
        assert alice.evaluate("window.notReloaded") is True
        expect(alice.locator("#live-status")).to_contain_text("updated")

        # Pause A from its row: no request of A starts later than 2 s after.
        row = alice.locator('tr[data-job="A"]')
        row.get_by_role("button", name="Pause").click()
        expect(alice.locator(".flash.ok")).to_contain_text("Job A paused")
        paused = time.monotonic()
        expect(row.locator("td.state")).to_have_text("paused")
        time.sleep(WITHIN + 2.0)
        assert times(netlocs[0], paused + WITHIN) == []
        assert len(times(netlocs[1], paused + WITHIN)) >= 3  # B went on
        # Resume: A is fetched again within 2 s.
        row.get_by_role("button", name="Resume").click()
        expect(alice.locator(".flash.ok")).to_contain_text("Job A resumed")
        resumed = time.monotonic()
        wait_until(lambda: times(netlocs[0], resumed), 10, what="A fetched again")
        assert times(netlocs[0], resumed)[0] - resumed <= WITHIN
        screenshot(alice, "jobs")
        # Cancel: nothing of A starts later than 2 s after.
        row.get_by_role("button", name="Cancel").click()
        expect(alice.locator(".flash.ok")).to_contain_text("Job A cancelled")
        cancelled = time.monotonic()
        time.sleep(WITHIN + 1.5)
        assert times(netlocs[0], cancelled + WITHIN) == []
        assert state_of(r, "A") == "cancelled"
        by = [e for _, e in r.xrange(K.jobs_events) if e[b"job"] == b"A" and b"by" in e]
        assert [(e[b"state"], e[b"by"]) for e in by] == [
            (b"running", b"alice"),  # submitted from the form above
            (b"paused", b"alice"),
            (b"running", b"alice"),
            (b"cancelled", b"alice"),
        ]

        # A host of B slowed to one fetch a second, from its page.
        host = netlocs[1]
        alice.goto(base + "/hosts")
        alice.fill('input[name="q"]', host)
        alice.click('button:has-text("Find")')
        found = alice.locator("#search-results").get_by_role("link", name=host, exact=True)
        expect(found).to_be_visible()
        screenshot(alice, "hosts")
        found.click()
        expect(alice.locator("h1")).to_contain_text(host)
        alice.fill('input[name="delay"]', "1")
        alice.click('button:has-text("Apply")')
        expect(alice.locator(".flash.ok")).to_contain_text(f"Host {host}: delay 1.0")
        slowed = time.monotonic()
        expect(alice.locator("#host-delay")).to_have_text("1 s")
        time.sleep(WITHIN + 4.0)
        after = times(host, slowed + WITHIN)
        assert len(after) >= 3 and not spacing_faults(after, 1.0), after
        screenshot(alice, "host")
        alice.goto(base + "/")
        expect(alice.locator("#workers-alive")).to_have_text("2")
        screenshot(alice, "overview")
        for w in workers:
            w.stop()
