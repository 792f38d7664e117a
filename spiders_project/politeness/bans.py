"""Blocks are not content: what makes an answer a block (ban) rather than a page.

A site that throttles or bans a crawler often answers 403 or 429, or a 200
"challenge" page; stored as an item, that page replaces the content the
crawl was for. ``BAN_HTTP_CODES`` (default 403, 429) and ``BAN_BODY_PATTERNS``
(regexes searched in the text of the answer; default none) say what a block
looks like. A blocked answer is a failed attempt (``retries.BackoffRetryMiddleware``),
and, through a proxy, bans that proxy for the cluster (``spiders_project.proxies``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from scrapy.http import Response, TextResponse
from scrapy.settings import BaseSettings

from spiders_project.config import SettingsReader


@dataclass(frozen=True)
class BanRules:
    codes: frozenset[int]
    patterns: tuple[re.Pattern[str], ...]

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> BanRules:
        read = SettingsReader(settings)
        codes: set[int] = set()
        for code in read.getlist("BAN_HTTP_CODES"):
            try:
                codes.add(int(code))
            except (TypeError, ValueError):
                read.fail("BAN_HTTP_CODES", f"{code!r} is not an HTTP status")
        patterns = []
        for pattern in read.getlist("BAN_BODY_PATTERNS"):
            try:
                patterns.append(re.compile(str(pattern)))
            except re.error as exc:
                read.fail("BAN_BODY_PATTERNS", f"bad regex {pattern!r}: {exc}")
        return cls(frozenset(codes), tuple(patterns))

    def reason(self, response: Response) -> str | None:
        """Why ``response`` is a block ("HTTP 403", "body matches 'captcha'"), or None."""
        if response.status in self.codes:
            return f"HTTP {response.status}"
        if self.patterns and isinstance(response, TextResponse):
            text = response.text
            for pattern in self.patterns:
                if pattern.search(text):
                    return f"body matches {pattern.pattern!r}"
        return None
