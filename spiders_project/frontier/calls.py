"""KEYS and ARGV for each frontier script, shared by the asyncio scheduler and
the synchronous tools (commands, tests), so the argument layout documented in
each ``lua/*.lua`` header is built in exactly one place.

``now`` is the time-based scripts' first argument: "" (Redis' clock) in
production, a set time in tests (``clock.ScriptClock``)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import Any

from spiders_project.keys import RedisKeys
from spiders_project.keys.jobs import (
    host_jobs,
    job_control,
    job_counts,
    job_held,
    job_turns,
)

Call = tuple[list[str], list[Any]]

# The highest queue priority, either sign: the enqueue script keeps
# -priority * 2^40 + seq exact in a double.
MAX_PRIORITY = 4000


def refuse_guard(keys: RedisKeys) -> tuple[Any, ...]:
    """A write that changes nothing but that Redis refuses when queued under OOM.

    ``lua/enqueue.lua`` is not a flagged script (see its header), so inside
    MULTI Redis accepts it at queue time and it fails only when it runs,
    while the transaction's other commands (acks, LREMs) are applied. Queued
    before it, this command makes Redis refuse the whole transaction
    (EXECABORT) when it is out of memory. (On a replica, every write command
    is refused at queue time anyway.)
    """
    return ("INCRBY", keys.requests_seq, 0)


# How long a shard remembers that a seed's request went in (``seeds_taken``):
# it must outlast the gap between that enqueue and the seed's removal from
# start_urls, a few ms normally, longer only while the spider's master is
# unreachable. Ten minutes of seeds cost about 80 bytes each.
SEED_TAKEN_MS = 600_000


def enqueue_call(
    keys: RedisKeys,
    entries: Iterable[tuple[Any, ...]],
    *,
    seen: str = "exact",
    now: int | str = "",
) -> Call:
    """``lua/enqueue.lua`` for (host, fingerprint, priority, payload[, seed entry[, wait ms]]).

    Fingerprints are tokens of ``seen.SeenConfig.token``; ``seen`` is the
    seen-set's mode (``SeenConfig.spec``).

    A seed entry (the raw start_urls bytes) makes the request count only if
    this call claims that entry; host "" with a seed entry rejects the seed.
    A wait (a retry's backoff) keeps the request in its host's later set until due.

    A shard of a sharded frontier is in another slot than start_urls, which
    its script cannot touch: there the seed field is the entry's digest
    (``seed_digest``), and the request counts only if the shard has not taken
    that digest within ``SEED_TAKEN_MS`` (``keys.seeds_taken``); the caller
    removes the entry from start_urls afterwards (``batcher._flush_sharded``).
    """
    hosts: dict[str, int] = {}
    full: list[Any] = []  # septuples: requests that are not plain links
    links: list[Any] = []  # triples: the usual followed link (the script's header)
    for position, (host, fingerprint, priority, payload, *rest) in enumerate(entries):
        index = hosts.setdefault(host, len(hosts) + 1) if host else 0
        seed = rest[0] if rest else b""
        wait = rest[1] if len(rest) > 1 else 0
        if _is_link(fingerprint, priority, seed, wait):
            links += (fingerprint, payload, index)
        else:
            full += (position, fingerprint, priority, payload, index, seed, wait)
    in_shard = keys.sharded and keys.shard >= 0
    return (
        [
            keys.seen,
            keys.dupefilter,
            keys.requests_seq,
            keys.hosts,
            keys.requests_size,
            keys.seeds_taken if in_shard else keys.start_urls,
            # Untouched in a shard (no seed is rejected there): a key of its slot.
            keys.requests_seq if in_shard else keys.start_urls_rejected,
            *(keys.host_queue(h) for h in hosts),
            *(keys.host_later(h) for h in hosts),
            *(keys.host_list(h) for h in hosts),
            *(host_jobs(keys, h) for h in hosts),
            job_counts(keys),
            job_control(keys),
            job_turns(keys),
        ],
        [
            *(now, seen, SEED_TAKEN_MS if in_shard else "", len(hosts), *hosts),
            *(len(full) // 7, *full, *links),
        ],
    )


def _is_link(fingerprint: Any, priority: Any, seed: Any, wait: Any) -> bool:
    """Whether ``lua/enqueue.lua`` takes this request as a link: three arguments,
    queued at the end of its host's list if its fingerprint is new."""
    if not fingerprint or priority != 0 or seed or wait:
        return False
    mark = fingerprint[:1]
    return mark not in ("!", "~", b"!", b"~")


def seed_digest(entry: bytes) -> bytes:
    """A start_urls entry's name in a shard's ``seeds_taken`` (16 bytes)."""
    return hashlib.sha1(entry).digest()[:16]


def lease_call(
    keys: RedisKeys,
    want: int,
    lease_ms: int,
    candidates: Sequence[tuple[str, int] | tuple[str, int, int, bool]],
    next_hosts: int,
    per_host: int,
    owner: str,
    first_id: int,
    *,
    now: int | str = "",
    reads: Sequence[tuple[str, str]] = (),
) -> Call:
    """``lua/lease.lua`` for candidate (host, configured delay ms[, spares, holds])
    tuples; ``per_host`` is the cluster-wide cap of one host's leases; spares
    (default 0) is the most spare leases, holding no slot, to take of a host at
    its cap, and holds whether the caller holds slots of it already.

    Lease ids are ``<owner>/<first_id + k>``, ``owner`` the caller's prefix
    (``lease_id.prefix``); the caller must not pass the same ``first_id``
    twice (see the script's header). ``reads``: (hash, field) pairs on the
    call's own slot whose values the reply carries after its leases (its last
    element), read by the script after them.
    """
    args: list[Any] = [now, want, lease_ms, next_hosts, per_host, owner, first_id, len(candidates)]
    for host, delay_ms, *spares in candidates:
        spare, holds = spares if spares else (0, False)
        args += (host, delay_ms, spare, int(holds))
    args += (field for _, field in reads)
    return (
        [
            keys.hosts,
            keys.leases,
            keys.lease_info,
            keys.requests_size,
            keys.host_delays,
            keys.requests_rejected,
            keys.in_flight,
            keys.cap_waiters,
            keys.cap_handover,
            *(keys.host_queue(h) for h, *_ in candidates),
            *(keys.host_later(h) for h, *_ in candidates),
            *(keys.host_list(h) for h, *_ in candidates),
            *(host_jobs(keys, h) for h, *_ in candidates),
            keys.released,
            keys.host_limits,
            job_counts(keys),
            job_control(keys),
            job_held(keys),
            job_turns(keys),
            *(key for key, _ in reads),
        ],
        args,
    )


def requeue_call(
    keys: RedisKeys,
    leased: Sequence[tuple[bytes | str, str]],
    *,
    expired: bool,
    now: int | str = "",
) -> Call:
    """``lua/requeue.lua`` for (lease id, its host) pairs.

    ``expired=False``: the caller's own leases, handed back; ``expired=True``:
    leases found expired, each moved only if still expired when the script runs.
    """
    return (
        [
            keys.leases,
            keys.lease_info,
            keys.hosts,
            keys.requests_size,
            keys.in_flight,
            keys.cap_waiters,
            keys.released,
            *(keys.host_queue(h) for _, h in leased),
            *(keys.host_list(h) for _, h in leased),
            *(host_jobs(keys, h) for _, h in leased),
            job_counts(keys),
            job_turns(keys),
        ],
        [now, "expired" if expired else "mine", *(m for m, _ in leased)],
    )


def expired_call(keys: RedisKeys, limit: int, *, now: int | str = "") -> Call:
    """``lua/expired.lua``: up to ``limit`` expired leases with their hosts."""
    return [
        keys.leases,
        keys.lease_info,
        keys.requests_rejected,
        keys.released,
        job_counts(keys),
    ], [now, limit]


def ack_call(
    keys: RedisKeys,
    lease_ids: Sequence[bytes | str],
    *,
    releases: Sequence[bytes | str] = (),
    transfers: Sequence[tuple[bytes | str, bytes | str]] = (),
    pages: Sequence[tuple[bytes | str, int]] = (),
    now: int | str = "",
) -> Call:
    """``lua/ack.lua``: pass the cap slot of each (ended, spare) pair of
    ``transfers`` to the spare, give back the cap slots of ``releases`` (their
    download ended, the lease stays), then end ``pages`` and ``lease_ids``
    for good (processed, rejected or dead); ``pages`` are (lease id, code)
    of the leases whose job counts how they ended (``outcomes.ack_code``: a
    page fetched, with the items scraped from it, a dead letter, ...).

    Lease ids are unique, so this touches only the caller's own leases: one
    that expired and was leased again has a new id.
    """
    return (
        [
            keys.leases,
            keys.lease_info,
            keys.in_flight,
            keys.cap_waiters,
            keys.hosts,
            keys.cap_handover,
            keys.released,
            job_counts(keys),
        ],
        [now, len(releases), *releases, len(transfers), *(i for t in transfers for i in t)]
        + [len(pages), *(x for page in pages for x in page), *lease_ids],
    )


def seen_add_call(keys: RedisKeys, seen: str, tokens: Sequence[str]) -> Call:
    """``lua/seen_add.lua``: record ``tokens`` (``SeenConfig.token``) in mode ``seen``."""
    return [keys.seen, keys.dupefilter], [seen, *tokens]


def seen_migrate_call(keys: RedisKeys, seen: str, pairs: Sequence[tuple[str, bytes]]) -> Call:
    """``lua/seen_migrate.lua``: move (token, old member) pairs out of the old set."""
    args: list[Any] = [seen]
    for token, member in pairs:
        args += (token, member)
    return [keys.seen, keys.dupefilter], args


def reconcile_call(keys: RedisKeys, *, now: int | str = "") -> Call:
    """``lua/reconcile.lua`` for the shard of ``keys``: both its lanes, and its job counts."""
    lanes: list[str] = []
    for lane in keys.all_lanes:
        lanes += (
            lane.hosts,
            lane.leases,
            lane.requests_size,
            lane.in_flight,
            lane.cap_waiters,
            lane.released,
            job_held(lane),
        )
    return [*lanes, job_counts(keys)], [now]
