"""One tick's MULTI/EXEC (frontier/write_behind/transaction.py): ops grouped by kind and lane, and
the commands that carry them."""

from __future__ import annotations

from typing import Any

from spiders_project.frontier.scripts import FrontierScripts
from spiders_project.frontier.write_behind.transaction import (
    ACK,
    COMMAND,
    ENQUEUE,
    ITEM,
    PUSH,
    add_commands,
    by_lane,
    group,
    lease_part,
)
from spiders_project.keys import HTTP, RENDER, RedisKeys
from spiders_project.plumbing.clock import ScriptClock

K = RedisKeys("t")


class RecordingPipe:
    """Records the commands queued on it, as (name, first key; a script: all its keys)."""

    def __init__(self) -> None:
        self.commands: list[tuple[str, Any]] = []

    def evalsha(self, sha: str, numkeys: int, *args: Any) -> None:
        self.commands.append(("EVALSHA", args[:numkeys]))

    def rpush(self, key: str, *values: Any) -> None:
        self.commands.append(("RPUSH", key))

    def lpush(self, key: str, value: Any) -> None:
        self.commands.append(("LPUSH", key))

    def execute_command(self, *args: Any) -> None:
        self.commands.append((str(args[0]), args[1]))


def request(url: str, lane: str = HTTP) -> tuple[Any, ...]:
    return ("h", "1 " + url, 0, b'{"url":"%s"}' % url.encode(), b"", 0, lane)


def commands_of(ops: list[tuple[str, Any]]) -> tuple[RecordingPipe, Any, Any]:
    pipe = RecordingPipe()
    spans, enqueued = add_commands(
        pipe,  # type: ignore[arg-type]  # records what a Pipeline would queue
        K,
        group(ops),
        scripts=FrontierScripts(),
        seen="exact",
        clock=ScriptClock(),
    )
    return pipe, spans, enqueued


def test_a_lease_id_names_its_shard_and_lane() -> None:
    assert lease_part(b"vm:12:ab12cd@2/17") == (2, HTTP)
    assert lease_part("vm:12:ab12cd/17") == (0, HTTP)  # not sharded
    assert lease_part(b"host@name:1:ab/3") == (0, HTTP)  # an @ in the host, no shard
    assert lease_part(b"vm:12:ab12cd@2+render/17") == (2, RENDER)
    assert lease_part("vm:12:ab12cd+render/4") == (0, RENDER)
    assert lease_part("vm:12:ab+other/4") == (0, HTTP)  # not a lane


def test_ops_group_by_kind_in_their_order_kinds_as_they_first_came() -> None:
    """Two pages' item, link and ack interleave; a tick sends one group of each."""
    ops = [(ITEM, b"i1"), (ENQUEUE, "l1"), (ACK, "a1"), (ITEM, b"i2"), (ENQUEUE, "l2"), (ACK, "a2")]
    assert group(ops) == [(ITEM, [b"i1", b"i2"]), (ENQUEUE, ["l1", "l2"]), (ACK, ["a1", "a2"])]


def test_a_batch_splits_by_lane_in_the_order_of_lanes() -> None:
    batch = [("r1", RENDER), ("h1", HTTP), ("x1", "other"), ("r2", RENDER), ("h2", HTTP)]
    assert by_lane(batch, lambda entry: entry[1]) == [
        (HTTP, [("h1", HTTP), ("h2", HTTP)]),
        (RENDER, [("r1", RENDER), ("r2", RENDER)]),
        ("other", [("x1", "other")]),
    ]


def test_each_kind_spans_its_own_commands() -> None:
    """One command per lane for the scripts, per value for LPUSH, one RPUSH for all items;
    the spans let a refused command keep the ops of its kind only."""
    ops = [
        (ITEM, b"i1"),
        (ENQUEUE, request("http://h/1")),
        (ENQUEUE, request("http://h/2", RENDER)),
        (ACK, (b"w/1", False)),
        (ACK, (b"w+render/2", True)),
        (PUSH, (K.requests_rejected, b"bad")),
        (ITEM, b"i2"),
        (PUSH, (K.dead, b"dead")),
        (COMMAND, ("SET", "t:x", 1)),
    ]
    pipe, spans, enqueued = commands_of(ops)
    assert spans == [
        (ITEM, 0, 1, "RPUSH items"),
        (ENQUEUE, 1, 3, "script enqueue"),
        (ACK, 3, 5, "script ack"),
        (PUSH, 5, 7, "LPUSH"),
        (COMMAND, 7, 8, "SET"),
    ]
    assert [name for name, _ in pipe.commands] == ["RPUSH"] + ["EVALSHA"] * 4 + ["LPUSH"] * 2 + [
        "SET"
    ]
    # Each lane's script writes to that lane's queues.
    render = K.in_lane(RENDER)
    own = [K.requests_size, render.requests_size, K.leases, render.leases]
    assert all(key in keys for key, (_, keys) in zip(own, pipe.commands[1:5], strict=True))
    assert not any(
        key.startswith(render.lane_prefix) for _, keys in pipe.commands[1:4:2] for key in keys
    )
    assert [(index, [entry[1] for entry in entries]) for index, entries in enqueued] == [
        (1, ["1 http://h/1"]),
        (2, ["1 http://h/2"]),
    ]


def test_new_requests_without_items_or_pushes_carry_the_oom_guard() -> None:
    """RPUSH and LPUSH make Redis refuse a transaction whole under OOM; without them a
    guard write goes first (calls.refuse_guard), so acks never land without their links."""
    pipe, spans, enqueued = commands_of([(ENQUEUE, request("http://h/1")), (ACK, (b"w/1", False))])
    assert pipe.commands[0] == ("INCRBY", K.requests_seq)
    assert spans == [(ENQUEUE, 1, 2, "script enqueue"), (ACK, 2, 3, "script ack")]
    assert [index for index, _ in enqueued] == [1]
    pipe, spans, _ = commands_of([(ITEM, b"i1"), (ENQUEUE, request("http://h/1"))])
    assert pipe.commands[0] == ("RPUSH", K.items) and spans[0] == (ITEM, 0, 1, "RPUSH items")
