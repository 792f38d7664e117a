"""The ``RENDER_*`` settings, parsed once into a typed object that validates itself.

``PLAYWRIGHT_*`` settings stay scrapy-playwright's own (launch options, browser
type); everything this project decides about rendering has the ``RENDER_`` prefix
and is declared, with its default and a comment, in ``spiders_project.settings``.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from scrapy.settings import BaseSettings

#: Values Playwright accepts for ``page.goto(wait_until=...)``.
WAIT_UNTIL_VALUES = frozenset({"commit", "domcontentloaded", "load", "networkidle"})


class RenderConfigError(ValueError):
    """A ``RENDER_*`` setting that cannot work; the message names the setting."""


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

    def __post_init__(self) -> None:
        def check(ok: bool, message: str) -> None:
            if not ok:
                raise RenderConfigError(message)

        check(
            self.wait_until in WAIT_UNTIL_VALUES,
            f"RENDER_WAIT_UNTIL must be one of {sorted(WAIT_UNTIL_VALUES)}, "
            f"got {self.wait_until!r}",
        )
        check(self.timeout > 0, "RENDER_TIMEOUT must be > 0")
        check(self.idle_timeout >= 0, "RENDER_IDLE_TIMEOUT must be >= 0")
        # One attempt legitimately takes a navigation (timeout) plus a selector
        # wait (timeout) or an idle wait; a deadline inside that window would
        # cancel pages that were about to succeed and leave their slots busy.
        longest = self.timeout + max(self.timeout, self.idle_timeout)
        check(
            self.deadline > longest,
            f"RENDER_DEADLINE ({self.deadline:g} s) must exceed RENDER_TIMEOUT plus the "
            f"longer of RENDER_TIMEOUT and RENDER_IDLE_TIMEOUT ({longest:g} s)",
        )
        check(self.concurrency >= 1, "RENDER_CONCURRENCY must be >= 1")
        check(self.pages_per_context >= 1, "RENDER_PAGES_PER_CONTEXT must be >= 1")
        check(
            self.pages_per_browser >= self.pages_per_context,
            "RENDER_PAGES_PER_BROWSER must be >= RENDER_PAGES_PER_CONTEXT",
        )
        check(self.crash_retries >= 0, "RENDER_CRASH_RETRIES must be >= 0")

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> RenderConfig:
        return cls(
            enabled=settings.getbool("RENDER_ENABLED"),
            rules=parse_rules(settings.getdictorlist("RENDER_URL_PATTERNS")),
            wait_until=settings.get("RENDER_WAIT_UNTIL"),
            timeout=settings.getfloat("RENDER_TIMEOUT"),
            idle_timeout=settings.getfloat("RENDER_IDLE_TIMEOUT"),
            deadline=settings.getfloat("RENDER_DEADLINE"),
            concurrency=settings.getint("RENDER_CONCURRENCY"),
            pages_per_context=settings.getint("RENDER_PAGES_PER_CONTEXT"),
            pages_per_browser=settings.getint("RENDER_PAGES_PER_BROWSER"),
            block_resource_types=frozenset(_clean(settings.getlist("RENDER_BLOCK_RESOURCE_TYPES"))),
            block_domains=tuple(
                d.lower().lstrip(".") for d in _clean(settings.getlist("RENDER_BLOCK_DOMAINS"))
            ),
            crash_retries=settings.getint("RENDER_CRASH_RETRIES"),
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
            raise RenderConfigError(f"RENDER_URL_PATTERNS: not a regex: {pattern!r}")
        if selector is not None and not isinstance(selector, str):
            raise RenderConfigError(
                f"RENDER_URL_PATTERNS: selector of {pattern!r} must be a string or null"
            )
        try:
            compiled = re.compile(pattern.strip())
        except re.error as exc:
            raise RenderConfigError(f"RENDER_URL_PATTERNS: bad regex {pattern!r}: {exc}") from None
        rules.append(UrlRule(compiled, (selector or "").strip() or None))
    return tuple(rules)


def executable_problem(launch_options: dict) -> str | None:
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
