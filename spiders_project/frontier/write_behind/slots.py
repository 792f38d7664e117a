"""The write batcher over a sharded frontier: the slot of each op, and the seeds claimed after.

Redis Cluster has no transaction across slots, so the batcher sends one
MULTI/EXEC per slot, in two steps (``RedisBatcher._flush_sharded`` says why
that still keeps its guarantees). This module splits the ops of a step by
slot, and names the seeds to claim once their requests are in.
"""

from __future__ import annotations

from dataclasses import replace

from spiders_project.frontier.calls import seed_digest
from spiders_project.frontier.write_behind.ops import (
    Ack,
    Command,
    Enqueue,
    Op,
    Push,
    Release,
    Transfer,
)
from spiders_project.keys import RedisKeys


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
    if isinstance(op, Push):
        return _by_prefix(keys, op.key)
    if isinstance(op, Command):
        # EVAL source numkeys key...; any other command names its key first.
        args = op.args
        return _by_prefix(keys, str(args[3] if args[0] == "EVAL" else args[1]))
    # Items and seed rejections: the spider's own slot (items, start_urls).
    return keys


def _by_prefix(keys: RedisKeys, key: str) -> RedisKeys:
    for shard in keys.all_shards:
        if key.startswith(shard.frontier_prefix):
            return shard
    return keys
