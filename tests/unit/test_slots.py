"""The write batcher over a sharded frontier (frontier/write_behind/slots.py): the slot each op
writes to, and the seeds claimed once their requests are in."""

from __future__ import annotations

from spiders_project.frontier.calls import seed_digest
from spiders_project.frontier.write_behind.slots import by_slot, seed_claims, slot_keys
from spiders_project.frontier.write_behind.transaction import ACK, COMMAND, ENQUEUE, ITEM, PUSH
from spiders_project.keys import HTTP, RedisKeys

SHARDED = RedisKeys("distributed", cluster=True, shards=3)


def request(host: str, seed: bytes = b"") -> tuple[str, tuple[object, ...]]:
    return (ENQUEUE, (host, "1 x", 0, b"{}", seed, 0, HTTP))


def test_each_op_writes_to_its_own_slot() -> None:
    host = SHARDED.for_host("a.example")
    assert slot_keys(SHARDED, request("a.example")) == host
    assert slot_keys(SHARDED, (ENQUEUE, ("", "", 0, b"", b"bad seed", 0, HTTP))) == SHARDED
    assert slot_keys(SHARDED, (ACK, (b"vm:1:ab@2/7", False))) == SHARDED.of_shard(2)
    assert slot_keys(SHARDED, (ITEM, b"i")) == SHARDED
    assert slot_keys(SHARDED, (PUSH, (host.host_queue("x"), b"v"))) == host
    assert slot_keys(SHARDED, (PUSH, (SHARDED.dead, b"v"))) == SHARDED
    eval_op = (COMMAND, ("EVAL", "return 1", 1, host.leases, "arg"))
    assert slot_keys(SHARDED, eval_op) == host
    assert slot_keys(SHARDED, (COMMAND, ("DEL", host.leases))) == host


def test_a_seed_request_goes_with_its_digest_and_is_claimed_once_in() -> None:
    seeded, plain, item = request("a.example", b"seed 1"), request("b.example"), (ITEM, b"i")
    slots, seeds = by_slot(SHARDED, [seeded, item, plain])
    sent = [op for _, ops in slots.values() for op in ops]
    assert len(sent) == 3 and plain in sent and item in sent
    (sent_seed,) = [op for op in sent if op[0] == ENQUEUE and op[1][4]]
    assert sent_seed[1][4] == seed_digest(b"seed 1") and seeds == {id(sent_seed): seeded}
    for keys, ops in slots.values():
        assert all(slot_keys(SHARDED, op).frontier_prefix == keys.frontier_prefix for op in ops)
    # Its request went in: claimed.
    claims, kept = seed_claims(SHARDED, seeds, [item])
    assert claims == [(COMMAND, ("LREM", SHARDED.start_urls, 1, b"seed 1"))] and kept == [item]
    # Its request was kept: not claimed, and sent again as given, entry and all.
    claims, kept = seed_claims(SHARDED, seeds, [sent_seed, plain])
    assert claims == [] and kept == [seeded, plain]
