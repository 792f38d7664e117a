"""Each frontier script's call touches the keys of one slot (frontier/calls.py)."""

from __future__ import annotations

import pytest

from spiders_project.frontier.calls import ack_call, enqueue_call, lease_call, requeue_call
from spiders_project.keys import LANES, RedisKeys, key_slot

SHARDED = RedisKeys("distributed", cluster=True, shards=3)


@pytest.mark.parametrize("lane", LANES)
def test_every_frontier_script_of_a_shard_touches_one_slot(lane: str) -> None:
    shard = SHARDED.of_shard(1).in_lane(lane)
    calls = [
        enqueue_call(shard, [("h", "fp", 0, b"{}", b"", 0)]),
        lease_call(shard, 4, 1000, [("h", 0)], 8, 2, "w@1", 0),
        requeue_call(shard, [(b"w@1/0", "h")], expired=False),
        ack_call(shard, [b"w@1/0"]),
    ]
    for keys, _ in calls:
        assert len({key_slot(k) for k in keys}) == 1, keys
    # The render queue is in its shard's slot, with the seen-set it shares.
    assert key_slot(shard.hosts) == key_slot(SHARDED.of_shard(1).seen)
