"""Job webhooks: what is sent, how it is signed, when it is tried again.

Every entry of the jobs' events stream (``<spider>:jobs:events``: a job
running, paused, cancelled, finished or stalled) is POSTed to each of
``JOB_WEBHOOK_URLS``; ``webhook_delivery.py`` does the sending. This module
holds what a receiver relies on, pure, so the unit tests cover it:

- the body (:func:`event_body`): one JSON object, the event's own fields
  (``job``, ``state``, ``via``, ``at``, the job's counts, ...) with its
  stream ``id``, the one a retried POST carries again, and the ``spider``;
- the signature (:func:`sign`): ``X-Crawler-Signature: sha256=<hex>``, the
  HMAC-SHA256 of the raw body with ``JOB_WEBHOOK_SECRET``;
- the retries (:func:`retry_delay`): a failed POST is tried again after
  ``JOB_WEBHOOK_RETRY_DELAY``, doubling up to ``JOB_WEBHOOK_RETRY_MAX_DELAY``,
  until the event is ``JOB_WEBHOOK_MAX_AGE`` old; then it is dropped.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from scrapy.exceptions import NotConfigured
from scrapy.settings import BaseSettings

from spiders_project.config import SettingsReader
from spiders_project.read_model.job_progress import COUNTS

# The header that carries the signature, and its prefix.
SIGNATURE_HEADER = "X-Crawler-Signature"
SIGNATURE_PREFIX = "sha256="
# Event fields sent as JSON numbers (the stream holds text): the time, the
# seeds of a run, the job's counts, and when a stalled job last fetched.
NUMBERS = frozenset({"at", "seeds", "since", *COUNTS})
# Scrapy stats: POSTs answered 2xx, POSTs that failed (no answer in time,
# another status), events every URL took, and events given up (too old).
POSTED = "webhooks/posted"
FAILED = "webhooks/failed"
DELIVERED = "webhooks/delivered"
DROPPED = "webhooks/dropped"


@dataclass(frozen=True)
class WebhookConfig:
    """``JOB_WEBHOOK_*``: where the events go, the secret that signs them, and
    how long each POST and the retries of one event may take."""

    urls: tuple[str, ...]
    secret: str
    timeout: float  # seconds one POST may take, connecting included
    retry_delay: float  # seconds before the first retry; each next one doubles ...
    retry_max_delay: float  # ... up to this
    max_age: float  # seconds after its event's time an event is dropped

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> WebhookConfig:
        """The config; NotConfigured when ``JOB_WEBHOOK_URLS`` is empty."""
        read = SettingsReader(settings)
        urls: list[str] = []
        for raw in read.getlist("JOB_WEBHOOK_URLS"):
            url = str(raw).strip()
            if not url:
                continue
            parts = urlsplit(url)
            if parts.scheme not in ("http", "https") or not parts.hostname or ":?" in shown(url):
                # Only the bad one is shown: the others may carry a token.
                read.fail("JOB_WEBHOOK_URLS", f"{shown(url)!r} is not an http(s) URL", "...")
            if url not in urls:
                urls.append(url)
        if not urls:
            raise NotConfigured("JOB_WEBHOOK_URLS is empty")
        secret = read.getstr("JOB_WEBHOOK_SECRET")
        if not secret:
            read.fail(
                "JOB_WEBHOOK_SECRET", "is empty: JOB_WEBHOOK_URLS is set, and every POST is signed"
            )
        timeout = read.getfloat("JOB_WEBHOOK_TIMEOUT", above=0)
        delay = read.getfloat("JOB_WEBHOOK_RETRY_DELAY", above=0)
        # Another process takes an event over once it has waited this long
        # since its last try: a try still under way would be doubled.
        read.check(
            delay > timeout,
            "JOB_WEBHOOK_RETRY_DELAY",
            f"must be more than JOB_WEBHOOK_TIMEOUT ({timeout:g} s)",
        )
        max_delay = read.getfloat("JOB_WEBHOOK_RETRY_MAX_DELAY", minimum=delay)
        return cls(
            urls=tuple(urls),
            secret=secret,
            timeout=timeout,
            retry_delay=delay,
            retry_max_delay=max_delay,
            max_age=read.getfloat("JOB_WEBHOOK_MAX_AGE", above=0),
        )


def sign(body: bytes, secret: str) -> str:
    """The ``X-Crawler-Signature`` value of ``body``: ``sha256=<hex HMAC-SHA256>``."""
    return SIGNATURE_PREFIX + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def retry_delay(tries: int, first: float, cap: float) -> float:
    """Seconds to wait after the ``tries``-th try of an event failed: ``first``,
    doubling with each try, never more than ``cap``."""
    if tries < 1:
        return 0.0
    return min(first * 2.0 ** min(tries - 1, 64), cap)


def _text(value: bytes | str) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def event_body(spider: str, event_id: str, fields: Mapping[Any, Any]) -> bytes:
    """The POST's body: ``{"id", "spider", <the event's fields>}`` as compact JSON,
    with ``NUMBERS`` as numbers (a field that does not parse stays text)."""
    body: dict[str, Any] = {"id": event_id, "spider": spider}
    for raw_name, raw_value in fields.items():
        name, value = _text(raw_name), _text(raw_value)
        if name in body:
            continue  # "id" and "spider" are the delivery's own
        if name in NUMBERS and value.lstrip("-").isdigit():
            body[name] = int(value)
        else:
            body[name] = value
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()


def url_tag(url: str) -> str:
    """A URL's name in Redis (the marks of who took an event): no token of it stored."""
    return hashlib.sha256(url.encode()).hexdigest()[:16]


def shown(url: str) -> str:
    """A URL as a log line shows it: no user, password or query (they may be tokens)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    try:
        port = f":{parts.port}" if parts.port else ""
    except ValueError:  # not a port number
        port = ":?"
    return f"{parts.scheme}://{host}{port}{parts.path}"
