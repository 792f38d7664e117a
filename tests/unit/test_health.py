"""When a working browser is restarted anyway: too big or too slow (rendering/health.py)."""

from __future__ import annotations

from spiders_project.rendering.health import MIN_PAGES, BrowserHealth


def test_memory_over_the_bound_asks_for_a_restart() -> None:
    health = BrowserHealth(max_rss_mb=1000, slowdown=0)
    assert health.too_big(999.0) is None
    why = health.too_big(1200.0)
    assert why is not None and "1200 MB" in why and "RENDER_MAX_RSS_MB=1000" in why
    assert BrowserHealth(max_rss_mb=0, slowdown=0).too_big(10**6) is None  # off


def test_pages_far_slower_than_usual_ask_for_a_restart_after_min_pages() -> None:
    health = BrowserHealth(max_rss_mb=0, slowdown=4.0)
    for _ in range(200):
        assert health.rendered(0.5) is None
    # A few slow pages do not; a run of them, four times the norm, does.
    assert all(health.rendered(3.0) is None for _ in range(3))
    reasons = [health.rendered(3.0) for _ in range(20)]
    assert any(reasons) and "RENDER_SLOWDOWN_FACTOR=4" in next(r for r in reasons if r)


def test_a_site_that_got_slower_costs_one_restart_not_a_loop() -> None:
    health = BrowserHealth(max_rss_mb=0, slowdown=2.0)
    for _ in range(100):
        health.rendered(0.5)
    reasons = [health.rendered(5.0) for _ in range(MIN_PAGES)]
    assert sum(r is not None for r in reasons) == 1  # once, while its restart is due
    health.restarted()
    # The new browser is as slow after its own MIN_PAGES: the site is, not the browser.
    assert all(health.rendered(5.0) is None for _ in range(5 * MIN_PAGES))
    assert health.norm > 4.0
    # A later browser that degrades from that new norm is restarted again.
    health.restarted()
    for _ in range(MIN_PAGES):
        health.rendered(5.0)
    assert any(health.rendered(25.0) for _ in range(MIN_PAGES))
