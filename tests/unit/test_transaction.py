"""One tick's MULTI/EXEC (frontier/write_behind/transaction.py): ops grouped by kind and lane, and
the commands that carry them."""

from __future__ import annotations

from typing import Any

from spiders_project.frontier.calls import ack_call
from spiders_project.frontier.lease_id import Lease
from spiders_project.frontier.outcomes import Outcome
from spiders_project.frontier.scripts import FrontierScripts
from spiders_project.frontier.write_behind.ops import (
    ACK,
    COMMAND,
    ENQUEUE,
    ITEM,
    PUSH,
    Ack,
    Command,
    Enqueue,
    Item,
    Op,
    Push,
    RejectSeed,
    Release,
    Transfer,
)
from spiders_project.frontier.write_behind.transaction import (
    add_commands,
    by_lane,
    enqueue_reply,
    group,
)
from spiders_project.keys import HTTP, RENDER, RedisKeys
from spiders_project.plumbing.clock import ScriptClock

K = RedisKeys("t")


def lease(lease_id: bytes) -> Lease:
    return Lease.of(lease_id, b"{}", "h")


class RecordingPipe:
    """Records the commands queued on it, as (name, first key; a script: all its keys)."""

    def __init__(self) -> None:
        self.commands: list[tuple[str, Any]] = []
        self.args: list[list[Any]] = []  # each script's ARGV

    def evalsha(self, sha: str, numkeys: int, *args: Any) -> None:
        self.commands.append(("EVALSHA", args[:numkeys]))
        self.args.append(list(args[numkeys:]))

    def rpush(self, key: str, *values: Any) -> None:
        self.commands.append(("RPUSH", key))

    def lpush(self, key: str, value: Any) -> None:
        self.commands.append(("LPUSH", key))

    def execute_command(self, *args: Any) -> None:
        self.commands.append((str(args[0]), args[1]))


def request(url: str, lane: str = HTTP) -> Enqueue:
    return Enqueue("h", "1 " + url, 0, b'{"url":"%s"}' % url.encode(), lane=lane)


def commands_of(ops: list[Op]) -> tuple[RecordingPipe, Any, Any]:
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


def test_ops_group_by_kind_in_their_order_kinds_as_they_first_came() -> None:
    """Two pages' item, link and ack interleave; a tick sends one group of each.
    Releases, transfers and seed rejections ride with their kind's script."""
    i1, i2, l1, l2 = Item(b"i1"), Item(b"i2"), request("http://h/1"), request("http://h/2")
    a1, r2 = Ack(lease(b"w/1"), Outcome.PAGE, 2), Release(lease(b"w/2"))
    t3, seed = Transfer(lease(b"w/3"), lease(b"w/4")), RejectSeed(b"bad seed")
    ops: list[Op] = [i1, l1, a1, i2, l2, r2, seed, t3]
    assert group(ops) == [(ITEM, [i1, i2]), (ENQUEUE, [l1, l2, seed]), (ACK, [a1, r2, t3])]


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
    ops: list[Op] = [
        Item(b"i1"),
        request("http://h/1"),
        request("http://h/2", RENDER),
        Ack(lease(b"w/1"), Outcome.NO_PAGE),
        Release(lease(b"w+render/2")),
        Push(K.requests_rejected, b"bad"),
        Item(b"i2"),
        Push(K.dead, b"dead"),
        Command(("SET", "t:x", 1)),
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
    assert [(index, [op.fingerprint for op in ops]) for index, ops in enqueued] == [
        (1, ["1 http://h/1"]),
        (2, ["1 http://h/2"]),
    ]


def test_new_requests_without_items_or_pushes_carry_the_oom_guard() -> None:
    """RPUSH and LPUSH make Redis refuse a transaction whole under OOM; without them a
    guard write goes first (calls.refuse_guard), so acks never land without their links."""
    pipe, spans, enqueued = commands_of(
        [request("http://h/1"), Ack(lease(b"w/1"), Outcome.NO_PAGE)]
    )
    assert pipe.commands[0] == ("INCRBY", K.requests_seq)
    assert spans == [(ENQUEUE, 1, 2, "script enqueue"), (ACK, 2, 3, "script ack")]
    assert [index for index, _ in enqueued] == [1]
    pipe, spans, _ = commands_of([Item(b"i1"), request("http://h/1")])
    assert pipe.commands[0] == ("RPUSH", K.items) and spans[0] == (ITEM, 0, 1, "RPUSH items")


def test_each_ack_goes_to_the_ack_script_as_its_outcome_says() -> None:
    """Releases, transfers, plain ends and counted ends, each in its place of
    lua/ack.lua's layout, with the code outcomes.ack_code gives."""
    ops: list[Op] = [
        Ack(lease(b"w/1"), Outcome.NO_PAGE, items=7),  # no page: its items are not counted
        Release(lease(b"w/2")),
        Ack(lease(b"w/2"), Outcome.PAGE, items=3),
        Transfer(lease(b"w/3"), lease(b"w/4")),
        Ack(lease(b"w/5"), Outcome.DEAD_LETTER),
        Ack(lease(b"w/6"), Outcome.REFUSED),
        Ack(lease(b"w/7"), Outcome.DROPPED),
        Ack(lease(b"w/8"), Outcome.PAGE),
    ]
    pipe, spans, _ = commands_of(ops)
    assert spans == [(ACK, 0, 1, "script ack")]
    _, expected = ack_call(
        K,
        [b"w/1"],
        releases=[b"w/2"],
        transfers=[(b"w/3", b"w/4")],
        pages=[(b"w/2", 3), (b"w/5", -1), (b"w/6", -2), (b"w/7", -3), (b"w/8", 0)],
        now="",
    )
    assert pipe.args == [expected]


def test_the_enqueue_reply_counts_requests_and_the_seeds_this_call_moved() -> None:
    refusal = Enqueue("h", "~1 abc", 0, b"{}")
    sent: list[Enqueue | RejectSeed] = [
        request("http://h/1"),
        refusal,
        RejectSeed(b"s1"),
        RejectSeed(b"s2"),
        RejectSeed(b"s3"),
    ]
    rejecting = {b"s1": "not JSON", b"s2": "no url", b"other": "kept for its own call"}
    # s2 was moved by another worker first; s3 was never asked for by this one.
    assert enqueue_reply(sent, [1, b"s1"], rejecting) == (1, 1, [(b"s1", "not JSON")])
    assert rejecting == {b"other": "kept for its own call"}
