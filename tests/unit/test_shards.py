"""Cases of the sharded frontier waiting for their module's file (issue 25).

They belong in test_batcher.py (``lease_part``, runtime/batcher.py) and
test_contract.py (``work_reads``/``work_of``, contract.py), which other
changes held when the unit tests were sorted by module: move them there.
"""

from __future__ import annotations

from spiders_project.contract import work_of, work_reads
from spiders_project.keys import HTTP, RENDER, RedisKeys
from spiders_project.runtime.batcher import lease_part

SHARDED = RedisKeys("distributed", cluster=True, shards=3)


def test_a_lease_id_names_its_shard_and_lane() -> None:
    assert lease_part(b"vm:12:ab12cd@2/17") == (2, HTTP)
    assert lease_part("vm:12:ab12cd/17") == (0, HTTP)  # not sharded
    assert lease_part(b"host@name:1:ab/3") == (0, HTTP)  # an @ in the host, no shard
    assert lease_part(b"vm:12:ab12cd@2+render/17") == (2, RENDER)
    assert lease_part("vm:12:ab12cd+render/4") == (0, RENDER)
    assert lease_part("vm:12:ab+other/4") == (0, HTTP)  # not a lane


def test_work_sums_the_shards_and_lanes() -> None:
    reads = work_reads(SHARDED)
    # The first shard's HTTP queue, the two other shards', then three render queues.
    assert len(reads) == 5 + 2 * 2 + 3 * 2
    assert reads[9:] == [
        cmd
        for shard in SHARDED.all_shards
        for cmd in (
            ("GET", shard.in_lane(RENDER).requests_size),
            ("ZCARD", shard.in_lane(RENDER).leases),
        )
    ]
    replies = [1, b"2", 3, 4, 5, b"10", 20, None, 30, b"1", 1, None, 0, b"4", 2]
    assert work_of(replies) == work_of([1, 17, 56, 4, 5])
