"""One tick of the write batcher as one MULTI/EXEC: the op kinds, their grouping, the commands.

The batcher (``batcher.py``, whose docstring states what it guarantees)
buffers ops ``(kind, argument)``; each tick lays them out here as the
commands of one transaction: one group per kind (``group``) and, for the
frontier's scripts, one call per lane (``by_lane``). The span of each kind
tells which commands carry it, so a command Redis refuses inside EXEC keeps
exactly the ops of its kind (``refusals.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from redis.asyncio.client import Pipeline

from spiders_project.frontier.calls import ack_call, enqueue_call, refuse_guard
from spiders_project.frontier.scripts import FrontierScripts
from spiders_project.keys import HTTP, LANES, RedisKeys
from spiders_project.plumbing.clock import ScriptClock
from spiders_project.redis_access import LuaScript, RedisCalls, RedisUnavailable

# The scripts a tick runs by SHA (EVALSHA), in the order the batcher loads them
# after a NOSCRIPT. By source (EVAL) Redis read and hashed (SHA1) 17 KB of
# script text at every tick, 33 us of its CPU for the enqueue script's 9.4 KB
# alone (docs/BENCHMARKS.md, issue 29). Inside MULTI a NOSCRIPT fails its
# command only, so a tick whose enqueue failed could apply its ack: the links
# of a page would land after its ack, lost if the worker died before sending
# them again. Redis only ever empties its script cache whole (a restart, a
# failover to a replica, SCRIPT FLUSH), and the batcher loads enqueue before
# ack, so a cache that knows ack knows enqueue: the two fail together, and
# are sent again together, in the tick's order. (A refused command of another
# kind has always been kept and sent again alone: refusals.py.)
BY_SHA = ("enqueue", "ack")

# Op kinds; a tick sends one group of commands per kind.
ENQUEUE, ITEM, ACK, PUSH, COMMAND = "enqueue", "item", "ack", "push", "command"
# The kinds whose writes replicas must confirm (WAIT) when asked to.
CONFIRMED = {ENQUEUE, ITEM, ACK}

# One buffered write: (kind, its argument).
Op = tuple[str, Any]
# The commands of one kind in a transaction: (kind, first index, end index, command name).
Span = tuple[str, int, int, str]


def group(ops: list[Op]) -> list[tuple[str, list[Any]]]:
    """The ops of each kind, in their order, kinds in order of first appearance.

    One group per kind, not per run of consecutive ops: a page's item, links
    and ack interleave with the next page's, so runs are a page long, and a
    tick would otherwise send one enqueue script, one RPUSH, one ZREM and one
    HDEL per page (one each: 17.6 -> 12.8 Redis commands per page in the benchmark).
    Regrouping is safe because the whole tick is one MULTI/EXEC: Redis applies
    it at once or not at all, so a page's ack never lands without its items.
    """
    groups: dict[str, list[Any]] = {}
    for kind, arg in ops:
        groups.setdefault(kind, []).append(arg)
    return list(groups.items())


def add_commands(
    pipe: Pipeline,
    keys: RedisKeys,
    groups: list[tuple[str, list[Any]]],
    *,
    scripts: FrontierScripts,
    seen: str,
    clock: ScriptClock,
) -> tuple[list[Span], list[tuple[int, list[Any]]]]:
    """Queue on ``pipe`` the commands of ``groups`` (``group``) for ``keys``' slot.

    Returns the span of each kind, and the index of each enqueue script with
    the requests it carries (its reply tells how many went in). ``seen`` is
    the seen-set's mode (``seen.SeenConfig.spec``).
    """
    spans: list[Span] = []
    enqueued: list[tuple[int, list[Any]]] = []  # (command index, its requests)
    n_commands = 0
    if any(kind == ENQUEUE for kind, _ in groups) and not any(
        kind in (ITEM, PUSH) for kind, _ in groups
    ):
        # RPUSH and LPUSH already make Redis refuse the transaction whole under OOM.
        pipe.execute_command(*refuse_guard(keys))
        n_commands += 1
    for kind, batch in groups:
        first = n_commands
        if kind == ENQUEUE:
            # One script per lane (its own queues and ready-set; the
            # seen-set is the same), all in this one transaction.
            for lane, entries in by_lane(batch, lambda entry: entry[6]):
                enqueue_keys, args = enqueue_call(
                    keys.in_lane(lane), entries, seen=seen, now=clock.arg()
                )
                # By SHA (see BY_SHA): a NOSCRIPT fails its kind alone, kept
                # and sent again once the batcher has loaded the scripts.
                pipe.evalsha(scripts.enqueue.sha, len(enqueue_keys), *enqueue_keys, *args)
                enqueued.append((n_commands, entries))
                n_commands += 1
            name = "script enqueue"
        elif kind == ITEM:
            pipe.rpush(keys.items, *batch)
            n_commands += 1
            name = "RPUSH items"
        elif kind == ACK:
            for lane, acks in by_lane(batch, lambda ack: lease_part(ack[0])[1]):
                ack_keys, args = ack_call(
                    keys.in_lane(lane),
                    [lease_id for lease_id, release in acks if release is False],
                    releases=[lease_id for lease_id, release in acks if release is True],
                    # (ended, spare): the slot passes to the spare (batcher.transfer)
                    transfers=[(i, to) for i, to in acks if isinstance(to, (bytes, str))],
                    # An int: ended with a page of that many items, or a dead
                    # letter (frontier/outcomes.py; batcher.ack)
                    pages=[(i, n) for i, n in acks if type(n) is int],
                    now=clock.arg(),
                )
                pipe.evalsha(scripts.ack.sha, len(ack_keys), *ack_keys, *args)
                n_commands += 1
            name = "script ack"
        elif kind == PUSH:
            for key, value in batch:
                pipe.lpush(key, value)
                n_commands += 1
            name = "LPUSH"
        else:
            for args in batch:
                pipe.execute_command(*args)
                n_commands += 1
            name = str(batch[0][0])
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


def by_lane(batch: list[Any], lane_of: Callable[[Any], str]) -> list[tuple[str, list[Any]]]:
    """``batch`` split by lane, in order within each; lanes in the order of ``LANES``."""
    lanes: dict[str, list[Any]] = {}
    for entry in batch:
        lanes.setdefault(lane_of(entry), []).append(entry)
    order = [lane for lane in LANES if lane in lanes]
    return [(lane, lanes[lane]) for lane in order + [lane for lane in lanes if lane not in LANES]]


def lease_part(lease_id: bytes | str) -> tuple[int, str]:
    """The (shard, lane) whose queue gave a lease id: lua/lease.lua names ids
    ``<owner>/<n>``; a sharded frontier's owner carries ``@<shard>``, and the
    render queue's ``+render`` after it (``WorkerRedis.lease_owner_of``)."""
    text = lease_id.decode() if isinstance(lease_id, bytes) else lease_id
    owner = text.rpartition("/")[0]
    head, plus, lane = owner.rpartition("+")
    if plus and lane in LANES:
        owner = head
    else:
        lane = HTTP
    _, at, shard = owner.rpartition("@")
    return (int(shard) if at and shard.isdigit() else 0), lane
