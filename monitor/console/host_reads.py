"""The hosts the console shows: live reads of bounded size, beside the sweep's ranking.

The frontier keeps no index of its hosts by queue length, and a crawl may have
hundreds of thousands of them: the ranking of the whole frontier is the
background sweep's (``host_sweep.py``). A page reads, in three round trips
of bounded size:

- the ready-set's ``READY_READ`` hosts due first (a ZSET by next turn) and its
  size, and its hosts whose next turn is over ``WAITING_AFTER_S`` away (a
  long delay or a backoff: a ZRANGE BYSCORE with a LIMIT);
- the hosts with downloads in flight, and those at their cap (two hashes
  bounded by the requests in flight), and the hosts an operator steers;
- then the queue lengths (ZCARD, LLEN) of those live candidates and of the
  hosts the page names besides (the sweep's busiest, a search's matches),
  and the next turn of those named besides that are no live candidate; in
  the lanes that hold any host only (an HTTP-only crawl: half the reads).

So a host queued since the sweep's last pass still shows among the busiest
when it is due first, and every size shown is read when the page renders.
One host (``/hosts/<host>``) is :func:`host_view.show`, as ``scrapy frontier
host --show`` prints it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from spiders_project.keys import LANES, RedisKeys
from spiders_project.keys.jobs import host_jobs
from spiders_project.read_model.contract import Send
from spiders_project.read_model.host_steering import HostSteer, parse_steering
from spiders_project.read_model.job_progress import _job_in
from spiders_project.read_model.replies import hash_fields, scored

# Hosts of the ready-set read per queue (lane of a shard), those due first.
READY_READ = 200
# A host whose next turn is this far away is shown as waiting (delay, backoff) ...
WAITING_AFTER_S = 10.0
# ... at most this many per queue.
WAITING_READ = 50
# The busiest hosts shown.
TOP_HOSTS = 25
# A search's matches shown (with their sizes read live).
SEARCH_SHOWN = 50
# A job's page: hosts of its seeds looked at, and members of each queue read to
# tell the job's share of it.
JOB_HOSTS_READ = 20
MEMBERS_READ = 100


@dataclass
class HostRow:
    """One host as the hosts page lists it."""

    host: str
    queued: int = 0  # in its queues (sorted set and list), every lane
    retries: int = 0  # retries waiting for their time
    in_flight: int = 0
    next_turn_s: float | None = None  # seconds until it may be fetched again; None: not ready-set
    capped: bool = False
    steer: HostSteer | None = None

    @property
    def live(self) -> bool:
        """Whether the frontier holds anything of the host now."""
        return bool(
            self.queued
            or self.retries
            or self.in_flight
            or self.capped
            or self.next_turn_s is not None
        )


@dataclass(frozen=True)
class HostsView:
    """What the hosts page shows of one spider."""

    ready: int  # hosts in the ready-sets (with requests and a turn)
    busiest: list[HostRow]
    capped: list[HostRow]
    waiting: list[HostRow]
    steered: list[HostRow]  # blocked first
    bad_steering: dict[str, str]
    candidates: int  # hosts whose queues were read
    rows: dict[str, HostRow] = field(default_factory=dict)  # every host read, by name


def _queues(keys: RedisKeys) -> list[RedisKeys]:
    return [lane for shard in keys.all_shards for lane in shard.all_lanes]


def read_hosts(send: Send, keys: RedisKeys, also: Sequence[str] = ()) -> HostsView:
    """The live candidates (the module docstring) and the hosts ``also`` names
    (bounded by the caller: the sweep's busiest, a search's matches), read now."""
    queues = _queues(keys)
    first: list[tuple[Any, ...]] = [("TIME",), ("HGETALL", keys.host_steering)]
    for q in queues:
        first += [
            ("ZCARD", q.hosts),
            ("ZRANGE", q.hosts, 0, READY_READ - 1, "WITHSCORES"),
            ("HGETALL", q.in_flight),
            ("HGETALL", q.cap_waiters),
        ]
    replies = send("console hosts", first)
    seconds, micros = replies[0]
    now_ms = int(seconds) * 1000 + int(micros) // 1000
    steered, bad = parse_steering(hash_fields(replies[1]))
    rows: dict[str, HostRow] = {}

    def row(host: Any) -> HostRow:
        name = host if isinstance(host, str) else host.decode("utf-8", "surrogateescape")
        return rows.setdefault(name, HostRow(name))

    def turn(r: HostRow, score_ms: float) -> None:
        wait = max(0.0, (score_ms - now_ms) / 1000)
        r.next_turn_s = wait if r.next_turn_s is None else min(r.next_turn_s, wait)

    ready = 0
    capped: set[str] = set()
    lanes: set[str] = set()  # those holding any host: the others' queues are empty
    at = 2
    for q in queues:
        size, due, flying, waiters = replies[at : at + 4]
        at += 4
        ready += int(size)
        if int(size) or flying or waiters:
            lanes.add(q.lane)
        for host, score in scored(due):
            turn(row(host), score)
        for host, n in hash_fields(flying).items():
            row(host).in_flight += int(n)
        for host in hash_fields(waiters):
            r = row(host)
            r.capped = True
            capped.add(r.host)
    for host, steer in steered.items():
        row(host).steer = steer
    later = [
        ("ZRANGE", q.hosts, now_ms + WAITING_AFTER_S * 1000, "+inf", "BYSCORE")
        + ("LIMIT", 0, WAITING_READ, "WITHSCORES")
        for q in queues
    ]
    waiting: set[str] = set()
    for reply in send("console hosts waiting", later):
        for host, score in scored(reply):
            r = row(host)
            turn(r, score)
            waiting.add(r.host)
    unplaced = {host for host in also if host not in rows}
    for host in also:
        row(host)
    _add_sizes(send, keys, list(rows.values()), now_ms, [x for x in LANES if x in lanes], unplaced)
    by_size = sorted(rows.values(), key=lambda r: (-r.queued, r.host))
    return HostsView(
        ready=ready,
        busiest=[r for r in by_size if r.queued][:TOP_HOSTS],
        capped=sorted((rows[h] for h in capped), key=lambda r: r.host),
        waiting=sorted((rows[h] for h in waiting), key=lambda r: (-(r.next_turn_s or 0), r.host)),
        steered=sorted(
            (rows[h] for h in steered), key=lambda r: (not (r.steer and r.steer.blocked), r.host)
        ),
        bad_steering=bad,
        candidates=len(rows),
        rows=rows,
    )


def queued_reads(keys: RedisKeys, host: str, lanes: Sequence[str] = LANES) -> list[tuple[Any, ...]]:
    """The O(1) reads whose replies sum to ``host``'s requests queued in ``lanes``:
    its sorted set, its list and its jobs' set (``RedisKeys.host_queue``)."""
    shard = keys.for_host(host)
    reads: list[tuple[Any, ...]] = []
    for lane in lanes:
        k = shard.in_lane(lane)
        reads += [
            ("ZCARD", k.host_queue(host)),
            ("LLEN", k.host_list(host)),
            ("ZCARD", host_jobs(k, host)),
        ]
    return reads


def _add_sizes(
    send: Send,
    keys: RedisKeys,
    rows: list[HostRow],
    now_ms: int,
    lanes: Sequence[str],
    turns_of: set[str],
) -> None:
    """Each row's queued requests and retries waiting in ``lanes`` (those holding
    any host), and the next turn of the hosts ``turns_of`` names: one round trip."""
    reads: list[tuple[Any, ...]] = []
    for r in rows:
        reads += queued_reads(keys, r.host, lanes)
        shard = keys.for_host(r.host)
        for lane in lanes:
            k = shard.in_lane(lane)
            reads.append(("ZCARD", k.host_later(r.host)))
            if r.host in turns_of:
                reads.append(("ZSCORE", k.hosts, r.host))
    if not reads:
        return
    replies = iter(send("console host sizes", reads))
    for r in rows:
        turns = r.host in turns_of
        r.queued += sum(int(next(replies)) for _ in range(3 * len(lanes)))
        for _ in lanes:
            r.retries += int(next(replies))
            score = next(replies) if turns else None
            if score is not None:
                wait = max(0.0, (float(score) - now_ms) / 1000)
                r.next_turn_s = wait if r.next_turn_s is None else min(r.next_turn_s, wait)


@dataclass(frozen=True)
class JobHost:
    """A host of a job's seeds: its queue, and the job's share of its head."""

    host: str
    queued: int
    sampled: int  # members read from its queues
    of_job: int  # of those, the job's


def read_job_hosts(send: Send, keys: RedisKeys, job: str, hosts: list[str]) -> list[JobHost]:
    """The first ``JOB_HOSTS_READ`` of ``hosts`` (a job's seeds' queues), each with
    its queue length and how many of its first ``MEMBERS_READ`` requests per
    queue are ``job``'s, busiest first."""
    hosts = hosts[:JOB_HOSTS_READ]
    reads: list[tuple[Any, ...]] = []
    for host in hosts:
        shard = keys.for_host(host)
        for lane in LANES:
            k = shard.in_lane(lane)
            reads += [
                ("ZCARD", k.host_queue(host)),
                ("LLEN", k.host_list(host)),
                ("ZCARD", host_jobs(k, host)),
                ("ZRANGE", k.host_queue(host), 0, MEMBERS_READ - 1),
                ("LRANGE", k.host_list(host), 0, MEMBERS_READ - 1),
                ("ZRANGE", host_jobs(k, host), 0, MEMBERS_READ - 1),
            ]
    if not reads:
        return []
    replies = iter(send("console job hosts", reads))
    found = []
    for host in hosts:
        queued = sampled = mine = 0
        for _ in LANES:
            queued += int(next(replies)) + int(next(replies)) + int(next(replies))
            members = [*next(replies), *next(replies), *next(replies)]
            sampled += len(members)
            mine += sum(1 for m in members if _job_in(m) == job)
        found.append(JobHost(host, queued, sampled, mine))
    return sorted(found, key=lambda h: (-h.of_job, -h.queued, h.host))


def steer_text(steer: HostSteer | None) -> str:
    """An operator's overrides in a few words ("blocked", "delay 2 s, cap 1", "")."""
    if steer is None:
        return ""
    parts = ["blocked"] if steer.blocked else []
    if steer.delay is not None:
        parts.append(f"delay {steer.delay:g} s")
    if steer.cap is not None:
        parts.append(f"cap {steer.cap}")
    return ", ".join(parts)
