"""Forgetting a spider's whole frontier: SCHEDULER_FLUSH_ON_START, and SCHEDULER_PERSIST off.

Only ever run on purpose (both settings are off by default: crawl state is
shared by the cluster, and one worker stopping must not empty it for the
others).
"""

from __future__ import annotations

from spiders_project.frontier.context import WorkerRedis
from spiders_project.frontier.dupefilter import SentFingerprints
from spiders_project.keys import RedisKeys
from spiders_project.keys.jobs import host_jobs, job_counts, job_held, job_turns
from spiders_project.redis_access import RedisCalls


async def clear_frontier(redis: WorkerRedis, sent: SentFingerprints) -> None:
    """Forget every queued and leased request and every fingerprint (every shard),
    and this worker's seen-cache of them."""
    await redis.per_shard(_clear_shard)
    sent.clear()


async def _clear_shard(keys: RedisKeys, calls: RedisCalls) -> None:
    """Forget one shard's queued and leased requests (both lanes) and fingerprints.

    Host queues are found through the ready-set and the hosts at their
    cap: the lease script forgets a host only once its queue is empty
    (leased requests go with the leases, deleted whole).
    """
    client = calls.client
    # The shard's per-job counts go with the requests they count.
    doomed = [keys.requests_seq, keys.dupefilter, keys.seen, job_counts(keys)]
    for lane in keys.all_lanes:  # the HTTP queue and the render queue
        hosts = await calls.command("ZRANGE", lane.hosts, 0, -1, writes=False)
        hosts += await calls.command("HKEYS", lane.cap_waiters, writes=False)  # out of it
        names = {h.decode("utf-8", "replace") for h in hosts}
        doomed += [
            *(lane.host_queue(h) for h in names),
            *(lane.host_later(h) for h in names),
            *(lane.host_list(h) for h in names),
            *(host_jobs(lane, h) for h in names),
            job_turns(lane),
            lane.in_flight,
            lane.cap_waiters,
            lane.cap_handover,
            lane.released,
            lane.hosts,
            lane.requests_size,
            lane.leases,
            lane.lease_info,
            job_held(lane),  # paused jobs' requests, set aside
        ]
    await calls.call("DEL frontier", lambda: client.delete(*doomed))
    # The seen-set's buckets (or Bloom blocks) and its recorded mode.
    cursor: int = 0
    while True:
        cursor, found = await calls.command(
            "SCAN", cursor, "MATCH", keys.seen_parts, "COUNT", 1000, writes=False
        )
        if found:
            await calls.command("UNLINK", *found)
        if not int(cursor):
            break
