"""The item every crawled HTML page yields."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class PageItem:
    url: str  # canonical, without #fragment
    status: int
    title: str | None
    fetched_at: str  # ISO-8601, UTC
    depth: int
    spider: str
    rendered: bool = False
