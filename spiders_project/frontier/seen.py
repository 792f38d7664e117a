"""The shared seen-set: which request fingerprints the cluster has recorded.

scrapy-redis keeps a set of 40-hex SHA1 strings: 88 bytes of Redis memory per
URL, 9 GB per 10^8 URLs. The seen-set here (``lua/seen.lua``, run inside the
enqueue script so deduplication stays atomic with enqueueing) has two modes,
``DUPEFILTER_MODE``:

- ``exact`` (default): 64 bits of the fingerprint in small integer sets that
  Redis keeps as intsets, about 10 bytes per URL (docs/BENCHMARKS.md), with a
  false "seen" for about n / 2^73 of new URLs (1.1e-13 at 10^9 URLs);
- ``bloom``: a Bloom filter on plain Redis bitmaps, sized for
  ``DUPEFILTER_CAPACITY`` URLs at ``DUPEFILTER_ERROR_RATE`` (the fraction of
  new URLs wrongly taken for seen, and so never crawled, once it holds its
  capacity; more beyond it). Its memory is spent up front.

With ``RECRAWL_AFTER`` (seconds, 0 = never, the default) the exact mode
keeps, per URL, the time it was last enqueued, in units of RECRAWL_AFTER / 16
(``timed`` in Redis, about 14 bytes per URL): a URL seen longer ago than
that is enqueued again when rediscovered or seeded again, and a seed's own
``"recrawl_after"`` overrides it for the pages of that seed.

This module turns a fingerprint into the token the script reads, and
describes the mode to the script. All workers of a spider must use one
mode: the first records it in Redis (``<spider>:seen:mode``), and a worker
started with another refuses to start.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

from scrapy.settings import BaseSettings

from spiders_project.config import SettingsReader
from spiders_project.keys import RedisKeys
from spiders_project.redis_access.connection import sync_client
from spiders_project.redis_access.shards import spider_keys

# Bloom blocks: bitmaps of at most 2^27 bits (16 MB), so no key is huge
# (a 512 MB string stalls Redis when saved, copied or migrated).
BLOOM_BLOCK_BITS = 1 << 27
# Root buckets of the exact mode (lua/seen.lua: SEEN_ROOTS).
ROOTS = 512


# A timed seen-set's unit is RECRAWL_AFTER / TIME_STEPS: a URL is enqueued
# again between RECRAWL_AFTER and one unit later.
TIME_STEPS = 16


@dataclass(frozen=True)
class SeenConfig:
    """``DUPEFILTER_MODE``, for ``bloom`` its sizing, and ``RECRAWL_AFTER``."""

    mode: str
    capacity: int
    error_rate: float
    recrawl_after: float = 0.0  # seconds; 0: a URL seen is never enqueued again

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> SeenConfig:
        read = SettingsReader(settings)
        error_rate = read.getfloat("DUPEFILTER_ERROR_RATE", above=0)
        read.check(error_rate < 1, "DUPEFILTER_ERROR_RATE", "must be below 1")
        mode = read.getstr("DUPEFILTER_MODE", choices=("exact", "bloom"))
        recrawl_after = read.getfloat("RECRAWL_AFTER", minimum=0)
        read.check(
            not (recrawl_after and mode == "bloom"),
            "RECRAWL_AFTER",
            "needs DUPEFILTER_MODE=exact (a Bloom filter keeps no times)",
        )
        return cls(
            mode=mode,
            capacity=read.getint("DUPEFILTER_CAPACITY", minimum=1),
            error_rate=error_rate,
            recrawl_after=recrawl_after,
        )

    @property
    def timed(self) -> bool:
        """Whether the seen-set keeps times (RECRAWL_AFTER set)."""
        return self.recrawl_after > 0

    @property
    def spec(self) -> str:
        """The mode as ``lua/seen.lua`` reads it."""
        if self.timed:
            return f"timed {max(1, round(self.recrawl_after * 1000 / TIME_STEPS))}"
        if self.mode == "exact":
            return "exact"
        blocks, bits, hashes = self.bloom_shape()
        return f"bloom {blocks} {bits} {hashes}"

    def bloom_shape(self) -> tuple[int, int, int]:
        """(blocks, bits per block, hashes) of the Bloom filter.

        The optimum for n items at error rate p: m = -n ln p / (ln 2)^2
        bits and k = m/n ln 2 hashes; m is split into equal blocks.
        """
        bits = math.ceil(-self.capacity * math.log(self.error_rate) / math.log(2) ** 2)
        hashes = max(1, round(bits / self.capacity * math.log(2)))
        blocks = max(1, math.ceil(bits / BLOOM_BLOCK_BITS))
        return blocks, math.ceil(bits / blocks), hashes

    def recorded(self, now_ms: int) -> str:
        """What the first worker records as the spider's mode (``seen_mode``):
        the spec, and for ``timed`` the epoch its times count from."""
        return f"{self.spec} {now_ms}" if self.timed else self.spec

    def token(
        self, fingerprint: bytes, legacy: bool = False, recrawl_after: float | None = None
    ) -> str:
        """What the seen-set stores of ``fingerprint`` (Scrapy's, 20 bytes).

        Exact: ``"<root> <v>"``, v the first 8 bytes as a signed integer,
        root 9 bits of bytes 8-9 (not stored: the bucket says them); with
        ``legacy`` the hex follows, for the previous release's set. Timed:
        ``"<root> <v> <ms>"``, ms how long ago the URL must have been enqueued
        to be enqueued again (``recrawl_after`` seconds, else RECRAWL_AFTER).
        Bloom: the first 32 hex digits.
        """
        if len(fingerprint) < 16:  # a custom fingerprinter's: spread it
            fingerprint = hashlib.sha1(fingerprint).digest()
        if self.mode == "bloom":
            return fingerprint[:16].hex()
        v = int.from_bytes(fingerprint[:8], "big", signed=True)
        root = int.from_bytes(fingerprint[8:10], "big") % ROOTS
        if self.timed:
            after = self.recrawl_after if recrawl_after is None else recrawl_after
            return f"{root} {v} {round(after * 1000)}"
        if legacy:
            return f"{root} {v} {fingerprint.hex()}"
        return f"{root} {v}"


# The default mode, for callers built without settings (tests, other schedulers).
EXACT = SeenConfig("exact", 1, 0.5)


def mode_mismatch(keys: RedisKeys, spec: str, recorded: bytes | None) -> str | None:
    """Why a worker in mode ``spec`` must not join a spider whose seen-set is
    ``recorded`` (its ``seen_mode`` key), or None. Workers in different modes
    (or Bloom sizes) would each miss what the others recorded."""
    if recorded is None or recorded.decode() == spec:
        return None
    if spec.startswith("timed ") and recorded.startswith(b"timed "):
        return None  # the unit and epoch recorded win (seen.lua): RECRAWL_AFTER may change
    return (
        f"DUPEFILTER_MODE (with DUPEFILTER_CAPACITY, DUPEFILTER_ERROR_RATE, RECRAWL_AFTER) "
        f"gives {spec!r}, "
        f"but this spider's seen-set in Redis is {recorded.decode()!r} ({keys.seen_mode}): "
        "every worker of a spider must use the same"
    )


def mode_problem(settings: BaseSettings, spider: str) -> str | None:
    """``mode_mismatch`` for ``scrapy crawl <spider>``, before anything starts."""
    client = sync_client(settings)
    try:
        spec = SeenConfig.from_settings(settings).spec
        for keys in spider_keys(settings, spider).all_shards:
            recorded = client.get(keys.seen_mode)
            problem = mode_mismatch(keys, spec, recorded)  # type: ignore[arg-type]
            if problem is not None:
                return problem
        return None
    finally:
        client.close()
