"""Dead letters: requests that failed for good, kept in ``<spider>:dead``.

A worker's :class:`~spiders_project.dead_letters.middleware.DeadLetterMiddleware`
LPUSHes one JSON entry per request on which RetryMiddleware gave up::

    {"request": {...}, "url": "...", "error": "HTTP 503", "attempts": 3,
     "failed_at": "2025-01-01T00:00:00.000+00:00", "worker": "host:1234"}

``request`` is the frontier's own JSON (:func:`serialize.dumps`), embedded as an
object, so putting a dead letter back is a plain enqueue (``requeue.py``).
This module is the one place that writes and reads entries; ``scrapy
deadletters``, the middleware and the requeue share it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from spiders_project.frontier.codec import serialize
from spiders_project.frontier.codec.serialize import InvalidEntry
from spiders_project.frontier.codec.values import ValueCodec


@dataclass(frozen=True)
class DeadLetter:
    """One entry of the dead list."""

    request: dict[str, Any]  # the request as serialize.dumps wrote it, decoded
    url: str
    error: str
    attempts: int
    failed_at: str  # ISO 8601, UTC
    worker: str  # "host:pid"

    def dumps(self) -> bytes:
        entry = {
            "request": self.request,
            "url": self.url,
            "error": self.error,
            "attempts": self.attempts,
            "failed_at": self.failed_at,
            "worker": self.worker,
        }
        return json.dumps(entry, separators=(",", ":"), ensure_ascii=False).encode()

    @classmethod
    def loads(cls, raw: bytes | str, values: ValueCodec = serialize.PLAIN) -> DeadLetter:
        """The dead letter in ``raw``; raises InvalidEntry if it is not one we wrote.

        ``values`` is the project's codec: item classes in the request's meta
        are checked against its allow-list.
        """
        try:
            obj = json.loads(raw)
        except (UnicodeDecodeError, ValueError) as exc:
            raise InvalidEntry(f"not JSON: {exc}") from None
        if not isinstance(obj, dict):
            raise InvalidEntry("not a JSON object")
        request = obj.get("request")
        if not isinstance(request, dict):
            raise InvalidEntry("no request object")
        serialize.loads(json.dumps(request), values)  # raises InvalidEntry
        for name in ("url", "error", "failed_at", "worker"):
            if not isinstance(obj.get(name), str):
                raise InvalidEntry(f"bad {name}")
        attempts = obj.get("attempts")
        if not isinstance(attempts, int) or isinstance(attempts, bool) or attempts < 1:
            raise InvalidEntry("bad attempts")
        return cls(request, obj["url"], obj["error"], attempts, obj["failed_at"], obj["worker"])


def make_dead_letter(
    payload: bytes, *, error: str, attempts: int, failed_at: datetime, worker: str
) -> DeadLetter:
    """The dead letter of a request whose frontier JSON is ``payload``."""
    request = json.loads(payload)
    return DeadLetter(
        request=request,
        url=serialize.url_of(request),
        error=error,
        attempts=attempts,
        failed_at=failed_at.isoformat(timespec="milliseconds"),
        worker=worker,
    )
