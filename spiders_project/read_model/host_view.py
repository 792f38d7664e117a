"""One host as the frontier holds it: what ``scrapy frontier host --show`` prints and the
console's host page shows.

Two pipelined round trips through the caller's call path (the host's shard,
then the spider's slot), reads only (the monitor's Redis user may send them).
"""

from __future__ import annotations

from typing import Any

from spiders_project.keys import LANES, RedisKeys
from spiders_project.keys.jobs import host_jobs
from spiders_project.read_model.host_steering import HostSteer, InvalidSteering
from spiders_project.read_model.replies import scored, text
from spiders_project.redis_access import SyncRedisCalls


def show(
    calls: SyncRedisCalls, keys: RedisKeys, host: str, configured_ms: int, configured_cap: int
) -> dict[str, Any]:
    """Everything the frontier holds about ``host``, in two round trips (its
    shard, then the spider's slot): what ``--show`` prints."""
    shard = keys.for_host(host)
    reads: list[tuple[Any, ...]] = []
    for lane in LANES:
        k = shard.in_lane(lane)
        reads += [
            ("ZCARD", k.host_queue(host)),
            ("LLEN", k.host_list(host)),
            ("ZCARD", k.host_later(host)),
            ("HGET", k.in_flight, host),
            ("ZSCORE", k.hosts, host),
            ("ZCARD", host_jobs(k, host)),
        ]
    reads += [("HGET", shard.host_delays, host), ("HGET", shard.host_limits, host), ("TIME",)]
    replies = calls.pipelined("frontier host", reads, retry=False)
    origins = [f"{scheme}://{host}" for scheme in ("http", "https")]
    spider_reads: list[tuple[Any, ...]] = [("HGET", keys.host_steering, host)]
    for origin in origins:
        spider_reads += [
            ("STRLEN", keys.robots(origin)),
            ("PTTL", keys.robots(origin)),
            ("EXISTS", keys.robots_lock(origin)),
        ]
    spider_reads.append(("ZRANGE", keys.proxies_banned, 0, -1, "WITHSCORES"))
    more = calls.pipelined("frontier host", spider_reads, retry=False)
    seconds, micros = replies[-1]
    now_ms = int(seconds) * 1000 + int(micros) // 1000
    lanes = [replies[i : i + 6] for i in range(0, 6 * len(LANES), 6)]
    turns = [float(lane[4]) for lane in lanes if lane[4] is not None]
    try:
        steer = HostSteer.from_json(more[0]) if more[0] is not None else HostSteer()
        bad = None
    except InvalidSteering as exc:
        steer, bad = HostSteer(), str(exc)
    site_ms = int(replies[-3] or 0)
    override_ms = steer.delay_ms
    robots = {
        origin: _robots(int(more[1 + 3 * i]), int(more[2 + 3 * i]), bool(more[3 + 3 * i]))
        for i, origin in enumerate(origins)
    }
    bans = {text(m): (s - now_ms) / 1000 for m, s in scored(more[-1]) if s > now_ms}
    out: dict[str, Any] = {
        "host": host,
        "queued": sum(int(lane[0]) + int(lane[1]) + int(lane[5]) for lane in lanes),
        "retries_waiting": sum(int(lane[2]) for lane in lanes),
        "in_flight": sum(int(lane[3] or 0) for lane in lanes),
        "next_turn_in_s": max(0.0, (min(turns) - now_ms) / 1000) if turns else None,
        "delay": {
            "configured": configured_ms / 1000,
            "site": site_ms / 1000,
            "override": steer.delay,
            "effective": max(configured_ms if override_ms is None else override_ms, site_ms) / 1000,
        },
        "cap": {
            "configured": configured_cap,
            "override": steer.cap,
            "effective": steer.cap or configured_cap,
        },
        "blocked": steer.blocked,
        "limits_in_shard": text(replies[-2]) if replies[-2] is not None else None,
        "robots": robots,
        "proxy_bans": bans,
    }
    if bad is not None:
        out["bad_record"] = bad
    return out


def _robots(size: int, pttl: int, fetching: bool) -> str:
    if pttl == -2:
        return "being fetched" if fetching else "not fetched (or expired)"
    if size == 0:
        return "none (everything allowed)"
    expires = "" if pttl < 0 else f", kept {pttl / 1000:.0f} s more"
    return f"fetched ({size} bytes{expires})"
