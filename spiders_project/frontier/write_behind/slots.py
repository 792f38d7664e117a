"""The write batcher over a sharded frontier: the slot of each op, and the seeds claimed after.

Redis Cluster has no transaction across slots, so the batcher sends one
MULTI/EXEC per slot, in two steps (``RedisBatcher._flush_sharded`` says why
that still keeps its guarantees). This module splits the ops of a step by
slot, and names the seeds to claim once their requests are in.
"""

from __future__ import annotations

from spiders_project.frontier.calls import seed_digest
from spiders_project.frontier.write_behind.transaction import (
    ACK,
    COMMAND,
    ENQUEUE,
    PUSH,
    Op,
    lease_part,
)
from spiders_project.keys import RedisKeys


def by_slot(
    keys: RedisKeys, ops: list[Op]
) -> tuple[dict[str, tuple[RedisKeys, list[Op]]], dict[int, Op]]:
    """``ops`` by the frontier slot they write to, each with its keys, in their order.

    A seed's request goes to its host's shard with the entry's digest (that
    script cannot reach start_urls), and is claimed after (``seed_claims``):
    the second dict maps the id of each such op sent to the op as given.
    """
    slots: dict[str, tuple[RedisKeys, list[Op]]] = {}
    seeds: dict[int, Op] = {}  # id of the op sent -> the op as given
    for op in ops:
        op_keys = slot_keys(keys, op)
        if op[0] == ENQUEUE and op[1][0] and op[1][4]:
            host, fingerprint, priority, payload, _, wait_ms, lane = op[1]
            digest = seed_digest(op[1][4])
            sent = (ENQUEUE, (host, fingerprint, priority, payload, digest, wait_ms, lane))
            seeds[id(sent)] = op
            op = sent
        slots.setdefault(op_keys.frontier_prefix, (op_keys, []))[1].append(op)
    return slots, seeds


def seed_claims(keys: RedisKeys, seeds: dict[int, Op], kept: list[Op]) -> tuple[list[Op], list[Op]]:
    """(the claims of the seeds whose requests went in, the ``kept`` ops to send again).

    ``seeds`` and ``kept`` as ``by_slot`` and the transactions left them.
    """
    kept_ids = {id(op) for op in kept}
    claims: list[Op] = [
        (COMMAND, ("LREM", keys.start_urls, 1, given[1][4]))
        for sent_id, given in seeds.items()
        if sent_id not in kept_ids
    ]
    # A kept seed's request goes again as given, entry and all.
    return claims, [seeds.get(id(op), op) for op in kept]


def slot_keys(keys: RedisKeys, op: Op) -> RedisKeys:
    """The keys of the slot ``op`` writes to, of the spider's ``keys``."""
    kind, arg = op
    if kind == ENQUEUE:
        return keys.for_host(arg[0]) if arg[0] else keys
    if kind == ACK:
        return keys.of_shard(lease_part(arg[0])[0])
    if kind == PUSH:
        return _by_prefix(keys, arg[0])
    if kind == COMMAND:
        # EVAL source numkeys key...; any other command names its key first.
        return _by_prefix(keys, str(arg[3] if arg[0] == "EVAL" else arg[1]))
    return keys


def _by_prefix(keys: RedisKeys, key: str) -> RedisKeys:
    for shard in keys.all_shards:
        if key.startswith(shard.frontier_prefix):
            return shard
    return keys
