"""The document Chromium received for each rendered request, for its WARC response record.

A rendered response's body is the DOM Chromium built (what the spider
parses), not what the site sent. While the archive is on
(``ArchiveMiddleware`` sets ``enabled``), the rendering handler keeps the
navigation's own response body here (Chromium has undone its
Content-Encoding already) and the archive takes it with the response. Weak
keys: an entry goes with its request, whatever becomes of it.
"""

from __future__ import annotations

import weakref

from scrapy import Request
from scrapy.crawler import Crawler

from spiders_project.plumbing.wiring import shared


class RenderedSources:
    def __init__(self) -> None:
        self.enabled = False
        self.bodies: weakref.WeakKeyDictionary[Request, bytes] = weakref.WeakKeyDictionary()

    @classmethod
    def of(cls, crawler: Crawler) -> RenderedSources:
        return shared(crawler, cls, cls)
