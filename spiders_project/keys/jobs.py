"""Key names of the per-job counts (issue 27, item 5), beside ``keys.py``, which is at
its size limit. Stdlib only, like ``keys.py``: the runtime's scripts and the commands
and monitor that read the counts build them here.

Two hashes, bounded by the number of jobs, never by the number of URLs:

- :func:`job_counts`, one per frontier shard, kept by the frontier's scripts
  (``frontier/lua/job_counts.lua``): ``<job>|queued``, ``<job>|later``,
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

# The job of a seed that names none, and of everything crawled from it.
DEFAULT_JOB = "default"
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


def job_control(keys: RedisKeys) -> str:
    """Hash job -> "paused" or "cancelled" of this frontier shard (both lanes), read by
    its lease and enqueue scripts; a job that runs has no field. On an unsharded
    frontier it is the spider's own (:func:`spider_job_control`); a sharded one
    has a copy per shard, written by the operator's command after the spider's."""
    return keys.frontier_prefix + "jobs:control"


def spider_job_control(keys: RedisKeys) -> str:
    """Hash job -> "paused" or "cancelled" of the spider, written with the job's
    record (``jobs/lua/job_state.lua``) and read by every worker each second."""
    return keys.prefix + "jobs:control"


def job_held(keys: RedisKeys) -> str:
    """Sorted set of this shard's and lane's requests of paused jobs, set aside by
    the lease script: "<job> <queue score> <#host> <host><request>", all scored 0."""
    return keys.lane_prefix + "jobs:held"


def job_quiet(keys: RedisKeys) -> str:
    """Hash job -> "<ms> <ended>": since when a running job had nothing queued,
    backing off or in flight, and its ended count then (finish detection)."""
    return keys.prefix + "jobs:quiet"


def job_look(keys: RedisKeys) -> str:
    """String: the worker making this period's look at the jobs (SET NX PX)."""
    return keys.prefix + "jobs:look"


def job_stalls(keys: RedisKeys) -> str:
    """Hash job -> "<since ms> <said> <seen>": since when a running job with requests
    queued has fetched nothing (its start and pages then: ``seen``), and whether
    its "stalled" event was written (``said`` 1), so one is written per stall."""
    return keys.prefix + "jobs:stalls"


def webhook_marks(keys: RedisKeys, event_id: str) -> str:
    """Set of the webhook URLs (as tags) that took the event ``event_id`` while
    another failed: a retry skips them. Expires after the delivery window."""
    return keys.prefix + "jobs:webhooks:" + event_id


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
