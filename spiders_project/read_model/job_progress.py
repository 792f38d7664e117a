"""Progress of every crawl job, from what Redis holds: the job records and the per-job counts.

Pure: the caller reads (the records' HGETALL, each shard's counts:
:func:`count_keys`, TIME) and this module turns the replies into one
:class:`JobProgress` per job, so ``scrapy jobs list|show``, ``scrapy
crawlstatus`` and the exporter (which runs without Scrapy) give the same
numbers.

The counts are exact (``frontier/lua/job_counts.lua``, ``ack.lua``); the rate is
read from the marks ack.lua keeps per job and shard: pages/s over the last 30
to 60 s, 0 once no page of the job was acked for a minute; the ETA is queued
divided by that rate, an estimate, None (shown "unknown") while the rate is 0.

A job's leases are two counts: ``in_flight``, the downloads under way (its
leases that hold one of their host's download slots, the slots the
cluster-wide cap counts, so a job on one host never shows more than that
host's cap, as ``scrapy frontier host`` shows it), and ``leased``, the rest:
leased by a worker and not downloading, either not started yet (spare leases
waiting for a slot, requests a worker prefetched) or downloaded and waiting for
their page's ack (the next write tick).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from spiders_project.keys import RedisKeys
from spiders_project.keys.jobs import DEFAULT_JOB, host_jobs, job_counts

# The counts that only grow: a run's are the totals less the totals when it
# started, kept in its record as "base" (jobs/submit.py, jobs/states.py).
RUN_COUNTS = ("pages", "items", "dead_letters", "refused", "purged", "acked")
# A job whose last page was acked this long ago (ms) fetches 0 pages/s.
RATE_IDLE_MS = 60_000
# A job's counts, in the order ``--json`` and the jobs' events give them.
COUNTS = (
    "pages",
    "items",
    "queued",
    "in_flight",
    "leased",
    "backing_off",
    "dead_letters",
    "refused",
    "purged",
)
# The fields of ``scrapy jobs list|show --json``, in order: a script reading the JSON
# relies on them.
FIELDS = ("id", "state", "started_at", "finished_at", "seeds", *COUNTS, "pages_per_s", "eta_s")
# The fields of a job in a shard's counts (``<job>|<field>``, written by the
# frontier's scripts: frontier/lua/job_counts.lua), each to the JobProgress
# attribute it adds to.
COUNT_FIELDS = {
    "queued": "queued",
    "later": "backing_off",
    "leased": "leases",
    "slots": "in_flight",
    "acked": "acked",
    "pages": "pages",
    "items": "items",
    "dead_letters": "dead_letters",
    "refused": "refused",
    "purged": "purged",
}
# A shard's field "<job>|rate": the marks of the job's pages/s (ack.lua), not a count.
RATE = "rate"


@dataclass
class JobProgress:
    """One job as ``scrapy jobs show --json`` prints it (``FIELDS``)."""

    id: str
    state: str = "running"
    started_at: str | None = None
    finished_at: str | None = None
    seeds: list[str] = field(default_factory=list)
    pages: int = 0
    items: int = 0
    queued: int = 0
    in_flight: int = 0
    leased: int = 0
    backing_off: int = 0
    dead_letters: int = 0
    refused: int = 0
    purged: int = 0
    pages_per_s: float = 0.0
    eta_s: float | None = None
    # Not printed: its leases (in_flight + leased), leases of the job ended
    # (finish detection, jobs/finish.py), its hosts by queued requests
    # (``show``), when read, and its counts since the counts began (``totals``;
    # the fields above are this run's: RUN_COUNTS).
    leases: int = 0
    acked: int = 0
    top_hosts: list[tuple[str, int]] = field(default_factory=list)
    totals: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """The fields of ``--json`` (``FIELDS``), and ``top_hosts`` once read."""
        out = asdict(self)
        shown = {name: out[name] for name in FIELDS}
        if self.top_hosts:
            shown["top_hosts"] = [{"host": h, "queued": n} for h, n in self.top_hosts]
        return shown

    @property
    def active(self) -> bool:
        """Whether anything of the job is queued, backing off or leased."""
        return self.queued + self.leases + self.backing_off > 0


def count_keys(keys: RedisKeys) -> list[str]:
    """The hashes of per-job counts to read: every frontier shard's."""
    return [job_counts(shard) for shard in keys.all_shards]


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _iso(ms: Any) -> str | None:
    if not isinstance(ms, int | float):
        return None
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="seconds")


def _rate(mark: str, pages: int, now_ms: int) -> float:
    """Pages/s of one job in one shard, from its marks (``ack.lua``) and its pages now."""
    parts = mark.split()
    if len(parts) != 5 or not all(p.isdigit() for p in parts):
        return 0.0
    t0, p0, _, _, last = (int(p) for p in parts)
    if now_ms - last >= RATE_IDLE_MS or now_ms <= t0:
        return 0.0
    return max(pages - p0, 0) * 1000 / (now_ms - t0)


def job_progress(
    records: Mapping[Any, Any],
    shard_counts: list[Mapping[Any, Any]],
    now_ms: int,
) -> list[JobProgress]:
    """Every job that has a record or a count, by id.

    ``records``: HGETALL of ``keys.jobs``; ``shard_counts``: HGETALL of each
    of :func:`count_keys`.
    """
    jobs: dict[str, JobProgress] = {}

    def job(name: str) -> JobProgress:
        return jobs.setdefault(name, JobProgress(name))

    bases: dict[str, dict[str, Any]] = {}
    for raw_id, raw in records.items():
        progress = job(_text(raw_id))
        try:
            record = json.loads(raw)
        except ValueError:
            continue
        if isinstance(record, dict):
            if isinstance(record.get("base"), dict):
                bases[progress.id] = record["base"]
            progress.state = str(record.get("state", progress.state))
            progress.started_at = _iso(record.get("started_at"))
            progress.finished_at = _iso(record.get("finished_at"))
            seeds = record.get("seeds")
            progress.seeds = [str(s) for s in seeds] if isinstance(seeds, list) else []
    rates: dict[str, float] = {}
    for counts in shard_counts:
        marks: dict[str, str] = {}
        pages: dict[str, int] = {}
        for raw_field, raw_value in counts.items():
            name, _, what = _text(raw_field).rpartition("|")
            if not name:
                continue
            if what == RATE:
                marks[name] = _text(raw_value)
                continue
            n = int(raw_value)
            progress = job(name)
            attribute = COUNT_FIELDS.get(what)
            if attribute is None:
                continue
            setattr(progress, attribute, getattr(progress, attribute) + n)
            if what == "pages":
                pages[name] = n
        for name, mark in marks.items():
            rates[name] = rates.get(name, 0.0) + _rate(mark, pages.get(name, 0), now_ms)
    for name, progress in jobs.items():
        # The scripts change a lease's slot in the same step as the lease, and
        # each shard's hash is read whole at once: the bounds only keep counts
        # damaged by hand from showing less than nothing.
        progress.in_flight = min(max(progress.in_flight, 0), progress.leases)
        progress.leased = progress.leases - progress.in_flight
        base = bases.get(name, {})
        for what in RUN_COUNTS:
            total = getattr(progress, what)
            progress.totals[what] = total
            since = base.get(what)
            if isinstance(since, int) and not isinstance(since, bool):
                setattr(progress, what, max(total - since, 0))
        progress.pages_per_s = round(rates.get(name, 0.0), 3)
        if progress.pages_per_s > 0:
            progress.eta_s = round(progress.queued / progress.pages_per_s, 1)
    return [jobs[name] for name in sorted(jobs)]


def job_totals(calls: Any, keys: RedisKeys, job: str) -> dict[str, int]:
    """The job's counts since they began (``RUN_COUNTS``), the "base" of a new run."""
    shards = [calls.command("HGETALL", k, writes=False) or {} for k in count_keys(keys)]
    found = [p for p in job_progress({}, shards, 0) if p.id == job]
    return dict(found[0].totals) if found else {}


def read_jobs(calls: Any, keys: RedisKeys) -> list[JobProgress]:
    """Every job's progress, read with ``calls.command`` (a ``SyncRedisCalls``):
    TIME, the records and each shard's counts, one command each (a shard's
    hash is in its own slot on a Redis Cluster)."""
    seconds, micros = calls.command("TIME", writes=False)
    now_ms = int(seconds) * 1000 + int(micros) // 1000
    records = calls.command("HGETALL", keys.jobs, writes=False) or {}
    shards = [calls.command("HGETALL", k, writes=False) or {} for k in count_keys(keys)]
    return job_progress(records, shards, now_ms)


# The job of a queue member, as job_counts.lua reads it: what follows its first
# ',"m":{"crawl_job":"' (serialize.dumps puts the meta right after the URL and
# the job first in it) up to the next '"', if that is a job id.
_JOB_IN = re.compile(rb',"m":\{"crawl_job":"([^"]*)"')
_JOB_ID = re.compile(rb"[A-Za-z0-9._-]+")
# Hosts whose queues ``show`` reads (the largest), and members read per host.
HOSTS_READ = 100
MEMBERS_READ = 10_000


def _job_in(member: bytes) -> str:
    found = _JOB_IN.search(member)
    if found is None or not _JOB_ID.fullmatch(found.group(1)):
        return DEFAULT_JOB
    return found.group(1).decode()


def add_top_hosts(calls: Any, keys: RedisKeys, jobs: list[JobProgress], job: str, n: int) -> None:
    """Set ``top_hosts`` of ``job`` in ``jobs``: its hosts by requests queued.

    Reads the queues of the largest hosts of every shard and lane (at most
    ``HOSTS_READ`` each, ``MEMBERS_READ`` members a queue; the job's range of
    a host's jobs set is counted, not read): what ``scrapy jobs show`` pays
    once, never the crawl.
    """
    found = [p for p in jobs if p.id == job]
    if not found:
        return
    queued: dict[str, int] = {}
    for shard in keys.all_shards:
        for lane in shard.all_lanes:
            hosts = calls.command("ZRANGE", lane.hosts, 0, -1, writes=False)
            hosts += calls.command("HKEYS", lane.cap_waiters, writes=False)
            names = sorted({h.decode("utf-8", "surrogateescape") for h in hosts})
            sizes = [
                (
                    int(calls.command("ZCARD", lane.host_queue(h), writes=False))
                    + int(calls.command("LLEN", lane.host_list(h), writes=False))
                    + int(calls.command("ZCARD", host_jobs(lane, h), writes=False)),
                    h,
                )
                for h in names
            ]
            for _, host in sorted(sizes, reverse=True)[:HOSTS_READ]:
                members = calls.command(
                    "ZRANGE", lane.host_queue(host), 0, MEMBERS_READ - 1, writes=False
                )
                members += calls.command(
                    "LRANGE", lane.host_list(host), 0, MEMBERS_READ - 1, writes=False
                )
                mine = sum(1 for m in members if _job_in(m) == job)
                if job != DEFAULT_JOB:  # the job's range of the host's jobs set, counted
                    mine += int(
                        calls.command(
                            "ZLEXCOUNT", host_jobs(lane, host), f"[{job} ", f"({job}!", writes=False
                        )
                    )
                if mine:
                    queued[host] = queued.get(host, 0) + mine
    found[0].top_hosts = sorted(queued.items(), key=lambda kv: (-kv[1], kv[0]))[:n]


def eta_text(progress: JobProgress) -> str:
    """The ETA as an operator reads it: an estimate, or "unknown" while nothing is fetched."""
    if progress.eta_s is None:
        return "ETA unknown (no page in the last minute)" if progress.queued else "ETA -"
    return f"ETA ~{progress.eta_s:.0f} s (estimate: queued / pages/s)"


def summary(progress: JobProgress) -> str:
    """One line of ``scrapy jobs list`` and of ``scrapy crawlstatus``."""
    return (
        f"{progress.id}: {progress.state}, {progress.pages} pages, {progress.items} items, "
        f"{progress.queued} queued, {progress.in_flight} in flight, {progress.leased} leased, "
        f"{progress.backing_off} backing off, {progress.pages_per_s:g} pages/s, "
        + eta_text(progress)
    )


def details(progress: JobProgress) -> str:
    """``scrapy jobs show``: every field, one per line."""
    seeds = ", ".join(progress.seeds[:5]) + (" ..." if len(progress.seeds) > 5 else "")
    return "\n".join(
        [
            f"Job {progress.id}: {progress.state}",
            f"  started      {progress.started_at or '-'}",
            f"  finished     {progress.finished_at or '-'}",
            f"  seeds        {seeds or '-'}",
            f"  pages        {progress.pages}",
            f"  items        {progress.items}",
            f"  queued       {progress.queued}",
            f"  in flight    {progress.in_flight} (downloading)",
            f"  leased       {progress.leased} (not downloading: not started, or awaiting ack)",
            f"  backing off  {progress.backing_off}",
            f"  dead letters {progress.dead_letters}",
            f"  refused      {progress.refused}",
            f"  purged       {progress.purged}",
            f"  rate         {progress.pages_per_s:g} pages/s (last minute)",
            f"  {eta_text(progress)}",
        ]
        + (
            ["  top hosts by queued requests:"]
            + [f"    {host:<40} {n}" for host, n in progress.top_hosts]
            if progress.top_hosts
            else []
        )
    )
