"""RENDER_MODE=auto: HTTP first, Chromium only for the pages that need it;
real worker, Chromium, db_writer and Redis."""

from __future__ import annotations

import pytest

from tests.e2e.test_rendering_crawl import BLOCK_TEST_TRACKER, finish, stored
from tests.support.processes import K, db_writer, stat, worker
from tests.support.site import JsSite

pytestmark = pytest.mark.slow
LEARN = 3


def test_auto_mode_renders_only_the_pages_that_need_it(redis_url, r, tmp_path, procs):
    """A section of 50 pages where every tenth needs JavaScript (each is
    fetched over HTTP, found script-built, then rendered), and a section of 14
    JS-only pages under a JS-only root (after LEARN of them needed rendering,
    the rest go straight to the browser)."""
    db_path = tmp_path / "items.db"
    with JsSite(pages=15, plain_pages=0, slow_pages=0, mixed_pages=50) as site:
        r.lpush(K.start_urls, site.page_url(0, "m"), site.url)  # no meta: auto decides
        w = worker(
            "w",
            redis_url,
            tmp_path,
            "MAX_IDLE_TIME_BEFORE_CLOSE=3",
            BLOCK_TEST_TRACKER,
            "RENDER_MODE=auto",
            f"RENDER_AUTO_LEARN={LEARN}",
        )
        writer = db_writer("dbw", redis_url, f"sqlite:///{db_path}", tmp_path)
        procs += [w, writer]
        finish(r, writer, [w])
        items = stored(db_path)
        needs_js = site.js_urls() | site.mixed_js_urls()
        assert set(items) == site.js_urls() | site.mixed_urls()
        # Every page's JS-only content is stored, from a rendered page.
        for url in needs_js:
            assert items[url]["rendered"] is True, url
            assert items[url]["title"].startswith(("JS page", "JS mixed")), items[url]
        for url in site.mixed_urls() - needs_js:
            assert items[url]["rendered"] is False, url
            assert items[url]["title"].startswith("Mixed"), items[url]
        # Each page that needs JavaScript rendered once; none other rendered.
        for n in range(15):
            assert site.hits()[("127.0.0.1", f"/api/page/{n}")] == 1
        for n in range(9, 50, 10):
            assert site.hits()[("127.0.0.1", f"/api/m/{n}")] == 1
        host = site.url.split("//")[1].rstrip("/")
        renders = stat(r, w, "render/pages")
        assert renders == len(needs_js) == 20
        # The learning overhead: JS-only pages fetched over HTTP before their
        # section was learned: /page/<n> fetches beyond the 14 renders (the
        # 15th JS page is the root, "/").
        wasted = site.count("/page/") - 14
        assert wasted <= LEARN + 4, wasted
    assert stat(r, w, "render/auto/expectation_failed") == 5 + 1 + wasted
    assert stat(r, w, "render/auto/learned") == 14 - wasted
    assert stat(r, w, "render/auto/http_pages") == 45
    assert int(r.hget(K.render_auto, f"{host}/page js")) == wasted
    assert int(r.hget(K.render_auto, f"{host}/m http")) == 45
    log = w.log()
    assert "Traceback" not in log
