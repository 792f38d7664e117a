"""Key names of the crawl jobs' state, beside ``keys/__init__.py``. Stdlib only, like
it: the frontier's scripts and the commands and monitor that read the jobs build
them here.

The per-job counts, bounded by the number of jobs, never by the number of URLs,
are :func:`job_counts`, one hash per frontier shard, kept by the frontier's
scripts (``frontier/lua/job_counts.lua``). A shard's scripts touch one slot, so
each shard has its own; ``read_model/job_progress.py`` names their fields and
sums them.
"""

from __future__ import annotations

from spiders_project.keys import RedisKeys

# The job of a seed that names none, and of everything crawled from it.
DEFAULT_JOB = "default"


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


def host_jobs(keys: RedisKeys, host: str) -> str:
    """One host's requests of crawl jobs other than the default one, in this lane:
    sorted set of "<job> <order> <JSON request>", all scored 0, so a job's are one
    range in its queue order and the jobs take turns (frontier/lua/job_queues.lua).
    The default job's stay in the host's queue and list (``RedisKeys.host_queue``)."""
    return keys.lane_prefix + f"requests:jobs:{host}"


def job_turns(keys: RedisKeys) -> str:
    """Hash host -> the job its last lease served ("" the default job), of this
    lane, for the hosts with a jobs set (:func:`host_jobs`): their jobs take
    turns (frontier/lua/job_turns.lua)."""
    return keys.lane_prefix + "requests:job_turns"


def job_quiet(keys: RedisKeys) -> str:
    """Hash job -> "<ms> <ended>": since when a running job had nothing queued,
    backing off or in flight, and its ended count then (finish detection)."""
    return keys.prefix + "jobs:quiet"


def job_look(keys: RedisKeys) -> str:
    """String: the worker or monitor making this period's look at the jobs (SET NX PX)."""
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
