"""Key names of the per-job counts (issue 27, item 5), beside ``keys.py``, which is at
its size limit. Stdlib only, like ``keys.py``: the runtime's scripts and the commands
and monitor that read the counts build them here.

Two hashes, bounded by the number of jobs, never by the number of URLs:

- :func:`job_counts`, one per frontier shard, kept by the frontier's scripts
  (``runtime/lua/job_counts.lua``): ``<job>|queued``, ``<job>|later``,
  ``<job>|leased``, ``<job>|acked`` (leases ended), ``<job>|pages`` (those
  whose response reached the spider), ``<job>|items`` (scraped from those
  pages), ``<job>|dead_letters`` (leases whose request failed for good),
  ``<job>|refused`` (refused after their lease: robots.txt) and
  ``<job>|purged``. A shard's scripts touch one slot, so
  each shard has its own; readers sum them (:func:`sum_counts`).
- :func:`job_tally`, the spider's: ``<job>|refused`` for refusals before a
  lease (scope, budget), not written yet, read and added.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from spiders_project.keys import RedisKeys

# The fields of a job in the shards' hashes, and in the spider's tally.
FRONTIER_FIELDS = (
    "queued",
    "later",
    "leased",
    "acked",
    "pages",
    "items",
    "dead_letters",
    "refused",
    "purged",
)
# Refusals before a lease (scope, budget: links never queued) are not counted yet.
TALLY_FIELDS = ("refused",)
# A shard's field "<job>|rate": the marks of the job's pages/s (ack.lua), not a count.
RATE = "rate"


def job_counts(keys: RedisKeys) -> str:
    """Hash "<job>|<field>" -> count, of this frontier shard (both lanes: same slot)."""
    return keys.frontier_prefix + "jobs:counts"


def job_tally(keys: RedisKeys) -> str:
    """Hash "<job>|<field>" -> count, of the spider, written with the items and acks."""
    return keys.prefix + "jobs:tally"


def sum_counts(hashes: Iterable[Mapping[bytes | str, bytes | str]]) -> dict[str, dict[str, int]]:
    """job -> count -> the sum over ``hashes`` (HGETALL replies of the shards and the
    tally); the rate marks are left out."""
    out: dict[str, dict[str, int]] = {}
    for counts in hashes:
        for raw, value in counts.items():
            name = raw.decode() if isinstance(raw, bytes) else raw
            job, _, what = name.rpartition("|")
            if job and what != RATE:
                fields = out.setdefault(job, {})
                fields[what] = fields.get(what, 0) + int(value)
    return out
