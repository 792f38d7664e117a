"""The write batcher over a sharded frontier: each op's slot, the steps, the seeds claimed after.

Redis Cluster has no transaction across slots, so the batcher
(``RedisBatcher._flush_sharded``) sends one MULTI/EXEC per slot, all of a
step together (``send_by_slot``), in up to three steps, each only once Redis
took the one before whole (what it did not take is sent again, with the
steps after it, next tick):

1. the prior writes (``ops.Prior``: a shared cookie jar's update, in the
   spider's own slot), so no worker can lease a link before what the link
   depends on is in;
2. every write but the acks and the pages' items: each shard's new
   requests, the items of no page, rejects, dead letters;
3. the acks with the items and page-state entries of their pages, each
   shard's in one MULTI/EXEC (a page's entries go to the item buffer of its
   lease's shard: ``page_shards.py``), and the claims of the seeds whose
   requests went in.

A page's ack therefore still never lands before its links, and lands with
its items, atomically, as on one Redis; a worker killed between the steps
leaves its leases to expire and be fetched again, which the upserting
db_writer and the seen-set absorb. No write of a page goes to the spider's
own slot, so each master carries the pages of its own hosts. A seed is
claimed (removed from start_urls) after its request is queued, not in the
same script; the shard remembers the seed for ``calls.SEED_TAKEN_MS``
(``keys.seeds_taken``), so a worker that reads it again in between (two
workers polling together, or one killed between the steps) claims it
without queuing it twice. Unlike on one Redis, an identical entry pushed
again within that window is claimed without a second crawl.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import replace

from spiders_project.frontier.calls import seed_digest
from spiders_project.frontier.lease_id import NO_SHARD
from spiders_project.frontier.write_behind.ops import (
    ACK,
    PRIOR,
    Ack,
    Command,
    Enqueue,
    Item,
    Op,
    Prior,
    Push,
    Release,
    Transfer,
)
from spiders_project.keys import RedisKeys
from spiders_project.redis_access import RedisCalls


def steps(ops: list[Op]) -> tuple[list[Op], list[Op], list[Op]]:
    """``ops`` split into the three steps, each in its order: the prior writes; every
    write but the acks and the pages' items; the acks with the pages' items (a page's
    items and page-state entries ride in its shard's MULTI/EXEC with its ack)."""
    priors: list[Op] = []
    first: list[Op] = []
    second: list[Op] = []
    for op in ops:
        if op.kind == PRIOR:
            priors.append(op)
        elif op.kind == ACK or (isinstance(op, Item) and op.shard != NO_SHARD):
            second.append(op)
        else:
            first.append(op)
    return priors, first, second


async def send_by_slot(
    keys: RedisKeys,
    transaction: Callable[[RedisKeys, RedisCalls, list[Op]], Awaitable[tuple[list[Op], float]]],
    calls_for: Callable[[RedisKeys], RedisCalls],
    ops: list[Op],
) -> tuple[list[Op], float, list[Op]]:
    """``ops`` in one ``transaction`` per slot, all at once: (ops kept, backoff,
    seed claims due now that their requests are queued)."""
    slots, seeds = by_slot(keys, ops)
    if not slots:
        return [], 0.0, []
    replies = await asyncio.gather(
        *(transaction(slot, calls_for(slot), slot_ops) for slot, slot_ops in slots.values())
    )
    kept = [op for slot_kept, _ in replies for op in slot_kept]
    claims, kept = seed_claims(keys, seeds, kept)
    return kept, max(delay for _, delay in replies), claims


def by_slot(
    keys: RedisKeys, ops: list[Op]
) -> tuple[dict[str, tuple[RedisKeys, list[Op]]], dict[int, Enqueue]]:
    """``ops`` by the frontier slot they write to, each with its keys, in their order.

    A seed's request goes to its host's shard with the entry's digest (that
    script cannot reach start_urls), and is claimed after (``seed_claims``):
    the second dict maps the id of each such op sent to the op as given.
    """
    slots: dict[str, tuple[RedisKeys, list[Op]]] = {}
    seeds: dict[int, Enqueue] = {}  # id of the op sent -> the op as given
    for op in ops:
        op_keys = slot_keys(keys, op)
        if isinstance(op, Enqueue) and op.host and op.seed:
            sent = replace(op, seed=seed_digest(op.seed))
            seeds[id(sent)] = op
            op = sent
        slots.setdefault(op_keys.frontier_prefix, (op_keys, []))[1].append(op)
    return slots, seeds


def seed_claims(
    keys: RedisKeys, seeds: dict[int, Enqueue], kept: list[Op]
) -> tuple[list[Op], list[Op]]:
    """(the claims of the seeds whose requests went in, the ``kept`` ops to send again).

    ``seeds`` and ``kept`` as ``by_slot`` and the transactions left them.
    """
    kept_ids = {id(op) for op in kept}
    claims: list[Op] = [
        Command(("LREM", keys.start_urls, 1, given.seed))
        for sent_id, given in seeds.items()
        if sent_id not in kept_ids
    ]
    # A kept seed's request goes again as given, entry and all.
    return claims, [seeds.get(id(op), op) for op in kept]


def slot_keys(keys: RedisKeys, op: Op) -> RedisKeys:
    """The keys of the slot ``op`` writes to, of the spider's ``keys``."""
    if isinstance(op, Enqueue):
        return keys.for_host(op.host) if op.host else keys
    if isinstance(op, (Ack, Release, Transfer)):
        return keys.of_shard(op.lease.shard)
    if isinstance(op, Item):
        # A page's: its shard's item buffer; of no page (NO_SHARD): the spider's own.
        return keys.of_shard(op.shard)
    if isinstance(op, Push):
        return _by_prefix(keys, op.key)
    if isinstance(op, (Command, Prior)):
        # EVAL source numkeys key...; any other command names its key first.
        args = op.args
        return _by_prefix(keys, str(args[3] if args[0] == "EVAL" else args[1]))
    # Seed rejections: the spider's own slot (start_urls).
    return keys


def _by_prefix(keys: RedisKeys, key: str) -> RedisKeys:
    for shard in keys.all_shards:
        if key.startswith(shard.frontier_prefix):
            return shard
    return keys
