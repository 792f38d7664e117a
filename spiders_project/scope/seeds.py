"""Seeds as operators push them: a plain URL or a JSON object.

``redis-cli lpush distributed:start_urls https://example.com/`` or
``'{"url": "https://example.com/", "meta": {"playwright": true}, "priority": 5}'``.
Anything else raises :class:`InvalidSeed` with a one-line reason.

A JSON seed may also bound what is crawled from it, across all workers
(``spiders_project.scope.seed_limits``): ``"max_pages"``, ``"max_depth"``,
``"allow"`` and ``"deny"`` (lists of regexes on URLs), and
``"strip_params": false`` keeps the tracking parameters ``URL_STRIP_PARAMS``
would drop from its links. ``"recrawl_after": <seconds>`` replaces
``RECRAWL_AFTER`` for the seed's pages (the frontier's seen-set must keep
times: RECRAWL_AFTER set). ``"sitemap": true`` crawls what the sitemap at the
URL lists (``spiders_project.spiders.sitemaps``). ``"revisit": {...}`` is a
revisit the db_writer pushed back (``spiders_project.recrawl.page_state``): the URL's
last fetch, for its conditional request; checked here, it becomes
``meta.PAGE_STATE``.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from spiders_project.keys.jobs import DEFAULT_JOB
from spiders_project.recrawl.page_state import InvalidPageState, check_page_state

# A job id: 1-64 letters, digits, "-", "_" or "."; it goes into Redis key
# names and log lines as it is, so nothing else is allowed.
JOB_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")
# A scope_id: the same characters, up to 100 (``job.<id>.<run>`` fits).
SCOPE_ID = re.compile(r"[A-Za-z0-9._-]{1,100}")

# Scrapy signal sent (with ``entry``, the raw start_urls bytes) when a seed's
# request reaches the frontier: the seed reader rejects the seeds that a
# spider middleware dropped on the way, instead of reading them again forever.
seed_reached = object()


class InvalidSeed(ValueError):
    """An entry of start_urls that cannot become a request."""


@dataclass(frozen=True)
class Seed:
    url: str
    meta: dict[str, Any] = field(default_factory=dict)
    priority: int = 0
    # The seed's own limits, {"id": ..., "max_pages": ...}; empty without any.
    scope: dict[str, Any] = field(default_factory=dict)
    # {"sitemap": true}: the URL is a sitemap (or its host's robots.txt names them).
    sitemap: bool = False
    # The crawl job it belongs to.
    job: str = DEFAULT_JOB
    # A revisit's last fetch (page_state.check_page_state), for meta.PAGE_STATE.
    revisit: dict[str, Any] | None = None


def check_job_id(job: Any) -> str:
    """``job`` if it is a valid job id; raises InvalidSeed saying why not."""
    if not isinstance(job, str) or not JOB_ID.fullmatch(job):
        shown = job[:80] if isinstance(job, str) else job
        raise InvalidSeed(f"job must be 1-64 letters, digits, '-', '_' or '.': {shown!r}")
    return job


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
        sitemap = obj.get("sitemap", False)
        if not isinstance(sitemap, bool):
            raise InvalidSeed("sitemap must be true or false")
        job = check_job_id(obj.get("job", DEFAULT_JOB))
        url = _check_url(obj.get("url"))
        revisit = None
        if "revisit" in obj:
            try:
                revisit = check_page_state(obj["revisit"])
            except InvalidPageState as exc:
                raise InvalidSeed(str(exc)) from None
        return Seed(url, meta, priority, _scope(obj, text), sitemap, job, revisit)
    return Seed(_check_url(text))


def _scope(obj: dict[str, Any], text: str) -> dict[str, Any]:
    """The seed's limits, checked, with an id naming the seed in Redis (its budget)."""
    scope: dict[str, Any] = {}
    for name in ("max_pages", "max_depth"):
        if name in obj:
            value = obj[name]
            low = 1 if name == "max_pages" else 0
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise InvalidSeed(f"{name} must be an integer >= {low}")
            scope[name] = value
    for name in ("allow", "deny"):
        if name in obj:
            patterns = obj[name]
            if isinstance(patterns, str):
                patterns = [patterns]
            if not isinstance(patterns, list) or not all(isinstance(p, str) for p in patterns):
                raise InvalidSeed(f"{name} must be a regex or a list of regexes")
            for pattern in patterns:
                try:
                    re.compile(pattern)
                except re.error as exc:
                    raise InvalidSeed(f"{name}: bad regex {pattern!r}: {exc}") from None
            scope[name] = patterns
    if "recrawl_after" in obj:
        value = obj["recrawl_after"]
        if not isinstance(value, int | float) or isinstance(value, bool) or not value >= 0:
            raise InvalidSeed("recrawl_after must be a number of seconds >= 0")
        scope["recrawl_after"] = value
    if "strip_params" in obj:
        if not isinstance(obj["strip_params"], bool):
            raise InvalidSeed("strip_params must be true or false")
        scope["strip_params"] = obj["strip_params"]
    shared = obj.get("scope_id")
    if shared is not None and (not isinstance(shared, str) or not SCOPE_ID.fullmatch(shared)):
        raise InvalidSeed("scope_id must be 1-100 letters, digits, '-', '_' or '.'")
    if scope:
        if shared is None:
            scope["id"] = hashlib.sha1(text.encode("utf-8")).hexdigest()[:16]
        else:
            # Named by the seed, with a digest of its limits: seeds share a
            # budget only if they share the limits too, since each worker
            # keeps one set of compiled patterns and one "spent" mark per id.
            limits = json.dumps(scope, sort_keys=True).encode("utf-8")
            scope["id"] = f"{shared}.{hashlib.sha1(limits).hexdigest()[:8]}"
    return scope
