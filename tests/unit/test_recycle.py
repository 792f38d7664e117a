"""When a browser or its context is due for a restart (rendering/recycle.py)."""

from __future__ import annotations

from spiders_project.rendering.recycle import Recycler


def test_a_requested_restart_is_due_once_and_cleared_by_the_restart() -> None:
    recycler = Recycler(pages_per_context=10, pages_per_browser=1000)
    context = recycler.acquire()
    assert not recycler.browser_due()
    assert recycler.request_restart("memory", "too big")
    assert not recycler.request_restart("slowdown", "slow")  # one at a time
    assert recycler.browser_due() and recycler.due_because == ("memory", "too big")
    assert not recycler.drained.is_set()  # its page is in flight: it finishes first
    recycler.release(context)
    assert recycler.drained.is_set()
    recycler.browser_restarted()
    assert not recycler.browser_due()
    assert recycler.due_because[0] == "pages"
