"""Fingerprints from Scrapy's own request fingerprinter, kept in the shared seen-set."""

from __future__ import annotations

import time
from collections.abc import Callable

import redis
from scrapy import Request, Spider
from scrapy.crawler import Crawler
from scrapy.utils.request import RequestFingerprinterProtocol
from scrapy_redis.dupefilter import RFPDupeFilter

from spiders_project.frontier.calls import seen_add_call
from spiders_project.frontier.scripts import FrontierScripts
from spiders_project.frontier.seen import EXACT, SeenConfig
from spiders_project.frontier.steps import FrontierSteps
from spiders_project.keys import RedisKeys
from spiders_project.redis_access.connection import sync_client
from spiders_project.redis_access.shards import spider_keys


class FingerprintDupeFilter(RFPDupeFilter):  # type: ignore[misc]  # scrapy-redis ships no types
    """scrapy-redis' RFPDupeFilter with two fixes.

    - 0.9.1 hashes its own JSON of (method, canonical url, body), so a project
      that customises ``REQUEST_FINGERPRINTER_CLASS`` (or a middleware that
      relies on it) disagrees with the dupefilter; we use
      ``crawler.request_fingerprinter``.
    - Its ``close()`` deletes the shared set: one worker stopping would make
      the whole cluster forget what it had seen. Crawl state here is persistent.
    - Its set of 40-hex strings costs 88 bytes per URL; fingerprints go to the
      compact seen-set instead (``seen.py``).

    Our scheduler checks fingerprints in Redis in batches (``lua/enqueue.lua``),
    after :class:`SentFingerprints`; ``request_seen`` stays for use with other
    schedulers.
    """

    def __init__(
        self,
        server: redis.Redis,
        key: str,
        debug: bool = False,
        *,
        fingerprinter: RequestFingerprinterProtocol | None = None,
        seen: SeenConfig | None = None,
        keys: RedisKeys | None = None,
        group_of: Callable[[str], str] | None = None,
    ) -> None:
        super().__init__(server, key, debug)
        self.fingerprinter = fingerprinter
        self.seen = seen or EXACT
        self.keys = keys or RedisKeys(key.rpartition(":")[0])
        # The politeness group of a URL: the frontier's shard of its fingerprint.
        self.group_of = group_of
        self.seen_add = FrontierScripts().seen_add

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> FingerprintDupeFilter:
        assert crawler.spidercls is not None
        keys = spider_keys(crawler.settings, crawler.spidercls.name)
        return cls(
            sync_client(crawler.settings),
            key=keys.dupefilter,
            keys=keys,
            # DUPEFILTER_DEBUG is refused at start (scrapy_redis_compat): this
            # scheduler never calls request_seen, so it would log nothing.
            fingerprinter=crawler.request_fingerprinter,
            seen=SeenConfig.from_settings(crawler.settings),
            group_of=FrontierSteps.of(crawler).group_of if keys.sharded else None,
        )

    @classmethod
    def from_spider(cls, spider: Spider) -> FingerprintDupeFilter:
        return cls.from_crawler(spider.crawler)

    def request_seen(self, request: Request) -> bool:
        """Record the request's fingerprint; True if the cluster had seen it."""
        shard = self.keys
        if self.keys.sharded:
            assert self.group_of is not None, "a sharded frontier needs group_of"
            shard = self.keys.for_host(self.group_of(request.url))
        keys, args = seen_add_call(
            shard, self.seen.spec, [self.seen.token(self.fingerprint(request), legacy=True)]
        )
        (new,) = self.server.eval(self.seen_add.source, len(keys), *keys, *args)
        return not new

    def request_fingerprint(self, request: Request) -> str:
        return self.fingerprint(request).hex()

    def fingerprint(self, request: Request) -> bytes:
        """The raw fingerprint (``request_fingerprint`` is its hex, as stored in Redis)."""
        if self.fingerprinter is None:
            raise RuntimeError("FingerprintDupeFilter needs a crawler's request_fingerprinter")
        fingerprint: bytes = self.fingerprinter.fingerprint(request)
        return fingerprint

    def clear(self) -> None:
        """Forget every fingerprint: the seen-set (counter, buckets or Bloom
        blocks, mode) and the previous release's set."""
        for keys in self.keys.all_shards:
            doomed = [keys.seen, keys.dupefilter]
            doomed += self.server.scan_iter(match=keys.seen_parts, count=1000)
            self.server.delete(*doomed)

    def close(self, reason: str = "") -> None:
        """Keep the shared fingerprints; only ``clear()`` deletes them."""


class SentFingerprints:
    """Fingerprints this worker already sent to the shared dupefilter, the latest ``size``.

    Most links a spider yields were seen before (docs/BENCHMARKS.md gives the
    share on the benchmark's site), and without this each would be encoded as
    JSON and sent to Redis only for the dupefilter to reject it. A fingerprint
    found here is already in the Redis set, or in a write of this worker on its
    way there (writes are retried, never dropped), so the link can be dropped
    at once. It is a pre-filter only: a fingerprint that aged out goes to
    Redis, which decides as before. Two generations of ``size / 2`` keep the
    memory bounded (about 100 bytes a fingerprint) with O(1) operations.

    With RECRAWL_AFTER (``max_age`` seconds), a fingerprint must also leave
    before the seen-set would take it again: the generations also turn every
    ``max_age / 2``, so none is held longer than ``max_age``.
    """

    def __init__(
        self,
        size: int,
        max_age: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.half = max(0, size) // 2
        self._new: set[bytes] = set()
        self._old: set[bytes] = set()
        self._turn = max_age / 2 if max_age else None
        self._clock = clock
        self._born = clock()

    def __len__(self) -> int:
        return len(self._new) + len(self._old)

    def clear(self) -> None:
        """Forget everything (Redis may have lost what it acknowledged)."""
        self._new.clear()
        self._old.clear()

    def __contains__(self, fingerprint: bytes) -> bool:
        if self._turn is not None:
            age = self._clock() - self._born
            if age >= 2 * self._turn:  # both generations are too old
                self.clear()
                self._born = self._clock()
            elif age >= self._turn:
                self._next()
        return fingerprint in self._new or fingerprint in self._old

    def add(self, fingerprint: bytes) -> None:
        if not self.half:
            return
        self._new.add(fingerprint)
        if len(self._new) >= self.half:
            self._next()

    def _next(self) -> None:
        """A new generation; the oldest is forgotten."""
        self._old, self._new = self._new, set()
        self._born = self._clock()
