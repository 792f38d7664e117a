"""KEYS and ARGV for each frontier script, shared by the asyncio scheduler and
the synchronous tools (commands, tests), so the argument layout documented in
each ``lua/*.lua`` header is built in exactly one place."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from spiders_project.keys import RedisKeys

Call = tuple[list[str], list[Any]]


def enqueue_call(keys: RedisKeys, entries: Iterable[tuple[Any, ...]]) -> Call:
    """``lua/enqueue.lua`` for (host, fingerprint, priority, payload[, seed entry]).

    A seed entry (the raw start_urls bytes) makes the request count only if
    this call claims that entry; host "" with a seed entry rejects the seed.
    """
    hosts: dict[str, int] = {}
    quints: list[Any] = []
    for host, fingerprint, priority, payload, *seed in entries:
        index = hosts.setdefault(host, len(hosts) + 1) if host else 0
        quints += (fingerprint, priority, payload, index, seed[0] if seed else b"")
    return (
        [
            keys.dupefilter,
            keys.requests_seq,
            keys.hosts,
            keys.requests_size,
            keys.start_urls,
            keys.start_urls_rejected,
            *(keys.host_queue(h) for h in hosts),
        ],
        [len(hosts), *hosts, *quints],
    )


def lease_call(
    keys: RedisKeys,
    want: int,
    lease_ms: int,
    candidates: Sequence[tuple[str, int]],
    next_hosts: int,
    per_host: int,
) -> Call:
    """``lua/lease.lua`` for candidate (host, configured delay ms) pairs."""
    args: list[Any] = [want, lease_ms, next_hosts, per_host]
    for host, delay_ms in candidates:
        args += (host, delay_ms)
    return (
        [
            keys.hosts,
            keys.leases,
            keys.lease_info,
            keys.requests_size,
            keys.host_delays,
            *(keys.host_queue(h) for h, _ in candidates),
        ],
        args,
    )


def requeue_call(keys: RedisKeys, leased: Sequence[tuple[bytes, str]]) -> Call:
    """``lua/requeue.lua`` for (leased request, its host) pairs."""
    return (
        [
            keys.leases,
            keys.lease_info,
            keys.hosts,
            keys.requests_size,
            *(keys.host_queue(h) for _, h in leased),
        ],
        [m for m, _ in leased],
    )


def expired_call(keys: RedisKeys, limit: int) -> Call:
    """``lua/expired.lua``: up to ``limit`` expired leases with their hosts."""
    return [keys.leases, keys.lease_info], [limit]


def ack_commands(keys: RedisKeys, members: Sequence[bytes]) -> list[tuple[Any, ...]]:
    """The commands that end leases for good (processed, rejected or dead)."""
    return [("ZREM", keys.leases, *members), ("HDEL", keys.lease_info, *members)]
