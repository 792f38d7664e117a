"""The ``RENDER_*`` settings, read once into a typed config and checked (``from_settings``).

``PLAYWRIGHT_*`` settings stay scrapy-playwright's own (launch options, browser
type); everything this project decides about rendering has the ``RENDER_`` prefix
and is declared, with its default and a comment, in ``spiders_project.settings``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from scrapy.settings import BaseSettings

from spiders_project.config import SettingsReader

#: Values Playwright accepts for ``page.goto(wait_until=...)``.
WAIT_UNTIL_VALUES = frozenset({"commit", "domcontentloaded", "load", "networkidle"})


@dataclass(frozen=True)
class UrlRule:
    """URLs matching ``pattern`` render; ``wait_selector`` (if any) is awaited on them."""

    pattern: re.Pattern[str]
    wait_selector: str | None = None


@dataclass(frozen=True)
class RenderConfig:
    enabled: bool
    rules: tuple[UrlRule, ...]
    wait_until: str
    timeout: float  # seconds, per navigation and per selector wait
    idle_timeout: float  # seconds; 0 skips the network-idle wait
    deadline: float  # seconds, hard limit on one attempt
    concurrency: int
    pages_per_context: int
    pages_per_browser: int
    block_resource_types: frozenset[str]
    block_domains: tuple[str, ...]
    crash_retries: int
    mode: str = "rules"  # RENDER_MODE: "rules", or "auto" (HTTP first: rendering/auto.py)
    auto_rules: tuple[UrlRule, ...] = ()  # RENDER_AUTO_RULES: the selector a page must have
    auto_learn: int = 5  # RENDER_AUTO_LEARN: pages of a section before it renders directly
    max_rss_mb: int = 0  # RENDER_MAX_RSS_MB: restart the browser beyond it; 0: never
    slowdown: float = 0.0  # RENDER_SLOWDOWN_FACTOR: restart when pages take this much longer
    urls_per_page: int = 1  # RENDER_URLS_PER_PAGE: URLs one page renders before it is closed
    idle_page_close: float = 5.0  # RENDER_IDLE_PAGE_CLOSE: seconds an unused page stays open
    gc_between_urls: bool = False  # RENDER_GC_BETWEEN_URLS: collect a reused page's garbage
    images_unloaded: bool = False  # RENDER_IMAGES_UNLOADED: Chromium loads no image at all
    driver_node_options: str = ""  # RENDER_DRIVER_NODE_OPTIONS: NODE_OPTIONS of the driver

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> RenderConfig:
        read = SettingsReader(settings)
        timeout = read.getfloat("RENDER_TIMEOUT", above=0)
        idle_timeout = read.getfloat("RENDER_IDLE_TIMEOUT", minimum=0)
        deadline = read.getfloat("RENDER_DEADLINE", above=0)
        # One attempt legitimately takes a navigation (timeout) plus a selector
        # wait (timeout) or an idle wait; a deadline inside that window would
        # cancel pages that were about to succeed and leave their slots busy.
        longest = timeout + max(timeout, idle_timeout)
        read.check(
            deadline > longest,
            "RENDER_DEADLINE",
            f"must exceed RENDER_TIMEOUT plus the longer of RENDER_TIMEOUT and "
            f"RENDER_IDLE_TIMEOUT ({longest:g} s)",
        )
        pages_per_context = read.getint("RENDER_PAGES_PER_CONTEXT", minimum=1)
        slowdown = read.getfloat("RENDER_SLOWDOWN_FACTOR", minimum=0)
        read.check(
            slowdown == 0 or slowdown > 1,
            "RENDER_SLOWDOWN_FACTOR",
            "must be 0 (off) or above 1 (pages that many times slower than usual)",
        )
        try:
            rules = parse_rules(settings.getdictorlist("RENDER_URL_PATTERNS"))
        except (TypeError, ValueError) as exc:
            read.fail("RENDER_URL_PATTERNS", str(exc))
        try:
            auto_rules = parse_rules(settings.getdict("RENDER_AUTO_RULES"))
        except (TypeError, ValueError) as exc:
            read.fail("RENDER_AUTO_RULES", str(exc))
        read.check(
            all(rule.wait_selector for rule in auto_rules),
            "RENDER_AUTO_RULES",
            "each URL pattern needs the CSS selector its pages must have",
        )
        return cls(
            enabled=read.getbool("RENDER_ENABLED"),
            rules=rules,
            wait_until=read.getstr("RENDER_WAIT_UNTIL", choices=sorted(WAIT_UNTIL_VALUES)),
            timeout=timeout,
            idle_timeout=idle_timeout,
            deadline=deadline,
            concurrency=read.getint("RENDER_CONCURRENCY", minimum=1),
            pages_per_context=pages_per_context,
            pages_per_browser=read.getint("RENDER_PAGES_PER_BROWSER", minimum=pages_per_context),
            block_resource_types=frozenset(_clean(read.getlist("RENDER_BLOCK_RESOURCE_TYPES"))),
            block_domains=tuple(
                d.lower().lstrip(".") for d in _clean(read.getlist("RENDER_BLOCK_DOMAINS"))
            ),
            crash_retries=read.getint("RENDER_CRASH_RETRIES", minimum=0),
            mode=read.getstr("RENDER_MODE", choices=["rules", "auto"]),
            auto_rules=auto_rules,
            auto_learn=read.getint("RENDER_AUTO_LEARN", minimum=1),
            max_rss_mb=read.getint("RENDER_MAX_RSS_MB", minimum=0),
            slowdown=slowdown,
            urls_per_page=read.getint("RENDER_URLS_PER_PAGE", minimum=1),
            idle_page_close=read.getfloat("RENDER_IDLE_PAGE_CLOSE", above=0),
            gc_between_urls=read.getbool("RENDER_GC_BETWEEN_URLS"),
            images_unloaded=read.getbool("RENDER_IMAGES_UNLOADED"),
            driver_node_options=read.getstr("RENDER_DRIVER_NODE_OPTIONS").strip(),
        )

    @property
    def timeout_ms(self) -> float:
        return self.timeout * 1000

    @property
    def idle_timeout_ms(self) -> float:
        return self.idle_timeout * 1000


def _clean(values: list[str]) -> list[str]:
    return [v.strip() for v in values if isinstance(v, str) and v.strip()]


def parse_rules(value: dict[str, str | None] | list[str]) -> tuple[UrlRule, ...]:
    """``RENDER_URL_PATTERNS``: a list of regexes, or ``{regex: CSS selector or null}``."""
    items = value.items() if isinstance(value, dict) else ((p, None) for p in value)
    rules = []
    for pattern, selector in items:
        if not isinstance(pattern, str) or not pattern.strip():
            raise ValueError(f"not a regex: {pattern!r}")
        if selector is not None and not isinstance(selector, str):
            raise ValueError(f"the selector of {pattern!r} must be a string or null")
        try:
            compiled = re.compile(pattern.strip())
        except re.error as exc:
            raise ValueError(f"bad regex {pattern!r}: {exc}") from None
        rules.append(UrlRule(compiled, (selector or "").strip() or None))
    return tuple(rules)


def executable_problem(launch_options: Mapping[str, Any]) -> str | None:
    """Why ``executable_path`` of the launch options cannot start, or None if it can."""
    path = launch_options.get("executable_path")
    if path is None:
        return None
    if not os.path.isfile(path) or not os.access(path, os.X_OK):
        return (
            f"Chromium not found at {path} (set CHROMIUM_PATH, or run `make setup` to "
            f"install Debian's chromium); pages that need rendering will fail"
        )
    return None
