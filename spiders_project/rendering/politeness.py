"""The cluster-wide turn of a delayed host, taken right before the browser navigates.

``HostGateMiddleware`` grants each request its host's turn as the last
downloader middleware, which is right before the wire for plain HTTP. A
rendered request still has a page to open and routes to set up after that,
tens to hundreds of milliseconds that vary from page to page, so two turns
granted a delay apart could reach the site closer than the delay. The
rendering handler therefore takes the turn again here, after the page exists,
immediately before ``page.goto``; HostGateMiddleware leaves rendered
requests to it, so each takes one turn.
"""

from __future__ import annotations

from spiders_project.frontier.politeness import HostTurns as _HostTurns

# Added to the spacing of rendered navigations (seconds). After the turn the
# request still crosses Node, Chromium and scrapy-playwright's route handler
# (a round trip back to Python) before it reaches the wire: 5-30 ms measured
# here, more than POLITENESS_GUARD allows for plain HTTP.
NAVIGATION_GUARD = 0.05


class HostTurns(_HostTurns):
    """The frontier's host turns, with the navigation guard on top."""

    extra_ms = round(NAVIGATION_GUARD * 1000)
