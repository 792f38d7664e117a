"""The write batcher over a sharded frontier (frontier/write_behind/slots.py): the slot each op
writes to, the steps of a tick (a page's items with its ack, in its shard), and the seeds claimed
once their requests are in."""

from __future__ import annotations

import redis.asyncio

from spiders_project.frontier.calls import seed_digest
from spiders_project.frontier.lease_id import Lease
from spiders_project.frontier.outcomes import Outcome
from spiders_project.frontier.scripts import FrontierScripts
from spiders_project.frontier.write_behind.ops import (
    Ack,
    Command,
    Enqueue,
    Item,
    Op,
    Prior,
    Push,
    RejectSeed,
    Release,
    Transfer,
)
from spiders_project.frontier.write_behind.slots import by_slot, seed_claims, slot_keys, steps
from spiders_project.frontier.write_behind.transaction import add_commands, group
from spiders_project.keys import RedisKeys, shard_tag
from spiders_project.keys.cookies import cookie_jar
from spiders_project.plumbing.clock import ScriptClock

SHARDED = RedisKeys("distributed", cluster=True, shards=3)


def request(host: str, seed: bytes = b"") -> Enqueue:
    return Enqueue(host, "1 x", 0, b"{}", seed)


def test_each_op_writes_to_its_own_slot() -> None:
    host = SHARDED.for_host("a.example")
    shard_2 = Lease.of(b"vm:1:ab@2/7", b"{}", "b.example")
    assert slot_keys(SHARDED, request("a.example")) == host
    assert slot_keys(SHARDED, RejectSeed(b"bad seed")) == SHARDED
    assert slot_keys(SHARDED, Ack(shard_2, Outcome.PAGE, 1)) == SHARDED.of_shard(2)
    assert slot_keys(SHARDED, Release(shard_2)) == SHARDED.of_shard(2)
    assert slot_keys(SHARDED, Transfer(shard_2, shard_2)) == SHARDED.of_shard(2)
    # An item of no page: the spider's own buffer; a page's: its lease's shard's.
    assert slot_keys(SHARDED, Item(b"i")) == SHARDED
    assert slot_keys(SHARDED, Item(b"i", 2)) == SHARDED.of_shard(2)
    assert slot_keys(SHARDED, Push(host.host_queue("x"), b"v")) == host
    assert slot_keys(SHARDED, Push(SHARDED.dead, b"v")) == SHARDED
    eval_op = Command(("EVAL", "return 1", 1, host.leases, "arg"))
    assert slot_keys(SHARDED, eval_op) == host
    assert slot_keys(SHARDED, Command(("DEL", host.leases))) == host
    # A shared cookie jar's update: outside the prefix, in the spider's own slot.
    jar = cookie_jar(SHARDED, "default")
    assert slot_keys(SHARDED, Prior(("EVAL", "return 1", 3, jar, "j", "c"))) == SHARDED


def test_a_seed_request_goes_with_its_digest_and_is_claimed_once_in() -> None:
    seeded, plain, item = request("a.example", b"seed 1"), request("b.example"), Item(b"i")
    slots, seeds = by_slot(SHARDED, [seeded, item, plain])
    sent = [op for _, ops in slots.values() for op in ops]
    assert len(sent) == 3 and plain in sent and item in sent
    (sent_seed,) = [op for op in sent if isinstance(op, Enqueue) and op.seed]
    assert sent_seed.seed == seed_digest(b"seed 1") and seeds == {id(sent_seed): seeded}
    assert seeded.seed == b"seed 1"  # the op as given is left as it was
    for keys, ops in slots.values():
        assert all(slot_keys(SHARDED, op).frontier_prefix == keys.frontier_prefix for op in ops)
    # Its request went in: claimed.
    claims, kept = seed_claims(SHARDED, seeds, [item])
    assert claims == [Command(("LREM", SHARDED.start_urls, 1, b"seed 1"))] and kept == [item]
    # Its request was kept: not claimed, and sent again as given, entry and all.
    kept_ops: list[Op] = [sent_seed, plain]
    claims, kept = seed_claims(SHARDED, seeds, kept_ops)
    assert claims == [] and kept == [seeded, plain]


def test_a_pages_items_go_with_its_ack_into_its_shards_buffer() -> None:
    """A page's items and page-state entries are sent in the last step, with the
    acks, in the MULTI/EXEC of its lease's shard, RPUSHed onto that shard's buffer;
    the spider's own slot gets only the items of no page."""
    page = Lease.of(b"vm:1:ab@1/7", b"{}", "b.example")
    link = request("c.example")
    ack = Ack(page, Outcome.PAGE, 2)
    ops: list[Op] = [Item(b"i1", 1), link, Item(b"start item"), Item(b"state", 1), ack]
    priors, first, second = steps(ops)
    assert priors == [] and first == [link, Item(b"start item")]
    assert second == [Item(b"i1", 1), Item(b"state", 1), ack]
    slots, _ = by_slot(SHARDED, second)
    [(keys, sent)] = slots.values()
    assert keys.frontier_prefix == SHARDED.of_shard(1).frontier_prefix and sent == second
    # redis-py's own pipeline, never sent: the commands the transaction would carry.
    pipe = redis.asyncio.Redis().pipeline(transaction=True)
    add_commands(
        pipe, keys, group(sent), scripts=FrontierScripts(), seen="exact", clock=ScriptClock()
    )
    commands = [args for args, _ in pipe.command_stack]
    assert commands[0] == ("RPUSH", SHARDED.of_shard(1).items, b"i1", b"state")
    assert commands[0][1] == "{" + shard_tag("distributed", 1, 3) + "}:items"
    assert [c[0] for c in commands] == ["RPUSH", "EVALSHA"]  # the items, then the ack script
    home, _ = by_slot(SHARDED, first)
    assert sorted(home) == sorted([SHARDED.prefix, SHARDED.for_host("c.example").frontier_prefix])
