"""Seeds as operators push them: a plain URL or a JSON object.

``redis-cli lpush distributed:start_urls https://example.com/`` or
``'{"url": "https://example.com/", "meta": {"playwright": true}, "priority": 5}'``.
Anything else raises :class:`InvalidSeed` with a one-line reason.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit


class InvalidSeed(ValueError):
    """An entry of start_urls that cannot become a request."""


@dataclass(frozen=True)
class Seed:
    url: str
    meta: dict[str, Any] = field(default_factory=dict)
    priority: int = 0


def _check_url(url: Any) -> str:
    if not isinstance(url, str) or not url:
        raise InvalidSeed("url must be a non-empty string")
    if any(c.isspace() for c in url):
        raise InvalidSeed(f"url contains whitespace: {url[:200]!r}")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError as exc:
        raise InvalidSeed(f"not a URL ({exc}): {url[:200]!r}") from None
    if parts.scheme not in ("http", "https"):
        raise InvalidSeed(f"scheme must be http or https: {url[:200]!r}")
    if not parts.hostname:
        raise InvalidSeed(f"url has no host: {url[:200]!r}")
    return url


def parse_seed(raw: bytes | str) -> Seed:
    """The seed encoded in one start_urls entry."""
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
    except UnicodeDecodeError:
        raise InvalidSeed("not UTF-8") from None
    text = text.strip()
    if text.startswith("{"):
        try:
            obj = json.loads(text)
        except ValueError as exc:
            raise InvalidSeed(f"invalid JSON: {exc}") from None
        if not isinstance(obj, dict):
            raise InvalidSeed("JSON seed must be an object")
        meta = obj.get("meta", {})
        if not isinstance(meta, dict):
            raise InvalidSeed("meta must be a JSON object")
        priority = obj.get("priority", 0)
        if not isinstance(priority, int) or isinstance(priority, bool):
            raise InvalidSeed("priority must be an integer")
        return Seed(_check_url(obj.get("url")), meta, priority)
    return Seed(_check_url(text))
