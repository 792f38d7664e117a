"""One tick of the write batcher as one MULTI/EXEC: the grouping of its ops, the commands.

The batcher (``batcher.py``, whose docstring states what it guarantees)
buffers ops (``ops.py``); each tick lays them out here as the commands of
one transaction: one group per kind (``group``) and, for the frontier's
scripts, one call per lane (``by_lane``). The span of each kind tells which
commands carry it, so a command Redis refuses inside EXEC keeps exactly the
ops of its kind (``refusals.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from redis.asyncio.client import Pipeline

from spiders_project.frontier.calls import Call, ack_call, enqueue_call, refuse_guard
from spiders_project.frontier.outcomes import ack_code
from spiders_project.frontier.scripts import FrontierScripts
from spiders_project.frontier.write_behind.ops import (
    ACK,
    ENQUEUE,
    ITEM,
    PRIOR,
    PUSH,
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
from spiders_project.keys import LANES, RedisKeys
from spiders_project.plumbing.clock import ScriptClock
from spiders_project.redis_access import LuaScript, RedisCalls, RedisUnavailable

T = TypeVar("T")

# The scripts a tick runs by SHA (EVALSHA), in the order the batcher loads them
# after a NOSCRIPT. By source (EVAL) Redis would read and hash every script's
# text at every tick, a cost docs/BENCHMARKS.md measures. Inside MULTI a NOSCRIPT fails its
# command only, so a tick whose enqueue failed could apply its ack: the links
# of a page would land after its ack, lost if the worker died before sending
# them again. Redis only ever empties its script cache whole (a restart, a
# failover to a replica, SCRIPT FLUSH), and the batcher loads enqueue before
# ack, so a cache that knows ack knows enqueue: the two fail together, and
# are sent again together, in the tick's order. (A refused command of another
# kind has always been kept and sent again alone: refusals.py.)
BY_SHA = ("enqueue", "ack")

# The kinds whose writes replicas must confirm (WAIT) when asked to.
CONFIRMED = {PRIOR, ENQUEUE, ITEM, ACK}

# The commands of one kind in a transaction: (kind, first index, end index, command name).
Span = tuple[str, int, int, str]
# The requests (and seed rejections) one enqueue script carries, with its index.
Enqueued = list[tuple[int, list[Enqueue | RejectSeed]]]


def group(ops: list[Op]) -> list[tuple[str, list[Any]]]:
    """The ops of each kind, in their order, kinds in order of first appearance,
    but the prior writes (``ops.Prior``) first.

    One group per kind, not per run of consecutive ops: a page's item, links
    and ack interleave with the next page's, so runs are a page long, and a
    tick would otherwise send one enqueue script, one RPUSH, one ZREM and one
    HDEL per page.
    Regrouping is safe because the whole tick is one MULTI/EXEC: Redis applies
    it at once or not at all, so a page's ack never lands without its items.
    """
    groups: dict[str, list[Any]] = {}
    for op in ops:
        groups.setdefault(op.kind, []).append(op)
    if PRIOR in groups:
        # Inside one MULTI/EXEC the order changes nothing Redis ends up with;
        # first, so the command list reads as the guarantee (ops.Prior).
        return [(PRIOR, groups.pop(PRIOR)), *groups.items()]
    return list(groups.items())


def add_commands(
    pipe: Pipeline,
    keys: RedisKeys,
    groups: list[tuple[str, list[Any]]],
    *,
    scripts: FrontierScripts,
    seen: str,
    clock: ScriptClock,
) -> tuple[list[Span], Enqueued]:
    """Queue on ``pipe`` the commands of ``groups`` (``group``) for ``keys``' slot.

    Returns the span of each kind, and the index of each enqueue script with
    the ops it carries (its reply tells how many requests went in). ``seen``
    is the seen-set's mode (``seen.SeenConfig.spec``).
    """
    spans: list[Span] = []
    enqueued: Enqueued = []  # (command index, its ops)
    n_commands = 0
    if any(kind in (ENQUEUE, PRIOR) for kind, _ in groups) and not any(
        kind in (ITEM, PUSH) for kind, _ in groups
    ):
        # RPUSH and LPUSH already make Redis refuse the transaction whole under
        # OOM. A prior write (a script, unflagged) would fail alone under OOM
        # while the acks beside it went in.
        pipe.execute_command(*refuse_guard(keys))
        n_commands += 1
    for kind, batch in groups:
        first = n_commands
        if kind == ENQUEUE:
            # One script per lane (its own queues and ready-set; the
            # seen-set is the same), all in this one transaction.
            for lane, entries in by_lane(batch, _lane):
                enqueue_keys, args = enqueue_call(
                    keys.in_lane(lane), map(_entry, entries), seen=seen, now=clock.arg()
                )
                # By SHA (see BY_SHA): a NOSCRIPT fails its kind alone, kept
                # and sent again once the batcher has loaded the scripts.
                pipe.evalsha(scripts.enqueue.sha, len(enqueue_keys), *enqueue_keys, *args)
                enqueued.append((n_commands, entries))
                n_commands += 1
            name = "script enqueue"
        elif kind == ITEM:
            items: list[Item] = batch
            pipe.rpush(keys.items, *(item.payload for item in items))
            n_commands += 1
            name = "RPUSH items"
        elif kind == ACK:
            for lane, acks in by_lane(batch, _lease_lane):
                ack_keys, args = _ack_call(keys.in_lane(lane), acks, clock.arg())
                pipe.evalsha(scripts.ack.sha, len(ack_keys), *ack_keys, *args)
                n_commands += 1
            name = "script ack"
        elif kind == PUSH:
            pushes: list[Push] = batch
            for push in pushes:
                pipe.lpush(push.key, push.value)
                n_commands += 1
            name = "LPUSH"
        elif kind == PRIOR:
            priors: list[Prior] = batch
            for prior in priors:
                pipe.execute_command(*prior.args)
                n_commands += 1
            name = f"prior {priors[0].args[0]}"
        else:
            commands: list[Command] = batch
            for command in commands:
                pipe.execute_command(*command.args)
                n_commands += 1
            name = str(commands[0].args[0])
        spans.append((kind, first, n_commands, name))
    return spans, enqueued


async def load_by_sha(calls: RedisCalls, scripts: FrontierScripts) -> float:
    """Load the scripts of BY_SHA into Redis' cache, in that order: 0, or the
    backoff when Redis could not take them (the tick is then sent again whole)."""
    for name in BY_SHA:
        script: LuaScript = getattr(scripts, name)

        def load(source: str = script.source) -> Any:
            return calls.client.script_load(source)

        try:
            await calls.call("SCRIPT LOAD", load, retry=False, writes=False)
        except RedisUnavailable as exc:
            return exc.delay
        except Exception:  # noqa: BLE001 - a caller's error, logged by the call path
            return calls.state.backoff_max
    return 0.0


def enqueue_reply(
    sent: list[Enqueue | RejectSeed], reply: Any, rejecting: dict[bytes, str]
) -> tuple[int, int, list[tuple[bytes, str]]]:
    """What one enqueue script's ``{enqueued, rejected seed...}`` says of the ops
    it was ``sent``: (requests sent, requests enqueued, (seed, reason) of each
    seed this call moved to start_urls:rejected). ``rejecting`` maps the seeds
    asked to be rejected to why; those this call carried are taken out of it.
    """
    # Refusals ("~": frontier/refused.py) are never queued: not requests sent.
    requests = sum(
        1 for op in sent if isinstance(op, Enqueue) and not op.fingerprint.startswith("~")
    )
    moved = set(reply[1:])
    rejected = []
    for op in sent:
        if not isinstance(op, RejectSeed) or op.seed not in rejecting:
            continue
        reason = rejecting.pop(op.seed)
        if op.seed in moved:
            moved.discard(op.seed)
            rejected.append((op.seed, reason))
    return requests, int(reply[0]), rejected


def _entry(op: Enqueue | RejectSeed) -> tuple[Any, ...]:
    """The enqueue script's entry of ``op`` (``calls.enqueue_call``): a seed
    rejection is an entry with no host."""
    if isinstance(op, RejectSeed):
        return ("", "", 0, b"", op.seed, 0)
    return (op.host, op.fingerprint, op.priority, op.payload, op.seed, op.wait_ms)


def _lane(op: Enqueue | RejectSeed) -> str:
    return op.lane


def _lease_lane(op: Ack | Release | Transfer) -> str:
    return op.lease.lane


def _ack_call(keys: RedisKeys, acks: list[Ack | Release | Transfer], now: int | str) -> Call:
    """``calls.ack_call`` for one lane's acks, releases and transfers, in their order."""
    ends: list[bytes] = []
    releases: list[bytes] = []
    transfers: list[tuple[bytes, bytes]] = []  # (ended, spare): the slot passes on
    counted: list[tuple[bytes, int]] = []  # (lease id, outcome's code: outcomes.ack_code)
    for op in acks:
        if isinstance(op, Release):
            releases.append(op.lease.id)
        elif isinstance(op, Transfer):
            transfers.append((op.lease.id, op.spare.id))
        else:
            code = ack_code(op.outcome, op.items)
            if code is None:
                ends.append(op.lease.id)
            else:
                counted.append((op.lease.id, code))
    return ack_call(keys, ends, releases=releases, transfers=transfers, pages=counted, now=now)


def by_lane(batch: Sequence[T], lane_of: Callable[[T], str]) -> list[tuple[str, list[T]]]:
    """``batch`` split by lane, in order within each; lanes in the order of ``LANES``."""
    lanes: dict[str, list[T]] = {}
    for entry in batch:
        lanes.setdefault(lane_of(entry), []).append(entry)
    order = [lane for lane in LANES if lane in lanes]
    return [(lane, lanes[lane]) for lane in order + [lane for lane in lanes if lane not in LANES]]
