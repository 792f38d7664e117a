"""Writes confirmed by replicas (``REDIS_WAIT_REPLICAS``): a WAIT after each tick that needs one.

The write batcher (``batcher.py``) counts a tick that carried requests, items
or acks as written only once ``WAIT`` says this many replicas have it: a
failover to a replica that lacks them then loses nothing a worker counted
done. How many replicas a master has, each slot's transaction reads from
``INFO replication`` every ``REPLICAS_EVERY`` seconds, in the same round trip
as its writes (no round trip of its own), and at once after a tick a WAIT
did not confirm (a failover may have changed the master).

Which replicas a tick waits for, per master (its replication id,
``master_replid``, which a promotion changes):

- a master that never had a replica online (a single Redis, or a replica
  promoted while its old master is dead or cut off) is waited for by nothing:
  there is nothing to wait for, and such a Redis must keep working;
- a master that had replicas online waits for ``min(wanted, most it had)``,
  even when fewer are online now. A master cut off from its replicas (the
  Jepsen case: a partition puts it on the minority side, the sentinels
  promote a replica on the other) still takes writes for a while, and loses
  them all when it rejoins as a replica. Counting "replicas connected now"
  would confirm exactly those writes; this way the worker keeps them and
  sends them again until a master with replicas has them. (Redis' own
  ``min-replicas-to-write`` makes that master refuse them, NOREPLICAS, after
  ``min-replicas-max-lag`` seconds; this rule also covers those seconds and a
  Redis configured without it.)
- a replica counts once it is ``online``: one doing a full resync (after a
  failover, the old master rejoining) cannot confirm anything, and waiting
  for it would stall every tick for the whole resync (at least
  ``repl-diskless-sync-delay`` after a failover).

A worker remembers this for its own life only: after an operator removes a
master's last replica for good, restart the workers (or set
REDIS_WAIT_REPLICAS=0), or they wait for it to come back.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Mapping
from typing import Any

from spiders_project.redis_access import RedisCalls

# Seconds between two reads of the master's replicas (sooner after an unconfirmed WAIT).
REPLICAS_EVERY = 5.0
# The name of each replica's line in INFO replication: slave0, slave1, ...
_REPLICA_LINE = re.compile(r"^slave\d+$")


def online_replicas(info: Mapping[str, Any]) -> int:
    """Replicas of ``INFO replication`` that are ``online`` (not resyncing).

    redis-py parses each ``slaveN`` line into a dict; a reply without them
    (a master without replicas, or a shortened one) counts ``connected_slaves``.
    """
    lines = [value for name, value in info.items() if _REPLICA_LINE.match(str(name))]
    if not lines:
        return int(info.get("connected_slaves", 0))
    online = 0
    for line in lines:
        if isinstance(line, Mapping):
            state = line.get("state")
        else:
            fields = dict(part.partition("=")[::2] for part in str(line).split(","))
            state = fields.get("state")
        online += state == "online"
    return online


class ReplicaWait:
    """The replicas whose confirmation writes wait for, and what each master says it has."""

    def __init__(self, wanted: int, timeout: float, logger: logging.Logger) -> None:
        # Replicas that must confirm writes (0: none).
        self.wanted = wanted
        self.timeout_ms = max(1, round(timeout * 1000))
        # The batcher's, so that these lines read as its own.
        self._logger = logger
        # By slot (frontier prefix): (online replicas as last read, when, master_replid).
        self._replicas: dict[str, tuple[int | None, float, str]] = {}
        # By master_replid: the most replicas seen online on that master.
        self._had: dict[str, int] = {}
        self._unconfirmed = False

    def connected(self, slot: str) -> int | None:
        """Online replicas of the master of ``slot``, as last read (None: not yet)."""
        return self._replicas.get(slot, (None, 0.0, ""))[0]

    def needed(self, slot: str) -> int:
        """How many replicas must confirm the last transaction on ``slot`` (see the module)."""
        online, _, replid = self._replicas.get(slot, (None, 0.0, ""))
        return min(self.wanted, max(online or 0, self._had.get(replid, 0)))

    def read_due(self, slot: str) -> bool:
        """Whether the next transaction on ``slot`` should read ``INFO replication``."""
        return bool(self.wanted) and (
            time.monotonic() - self._replicas.get(slot, (None, 0.0, ""))[1] >= REPLICAS_EVERY
        )

    def read(self, slot: str, info: Any) -> None:
        """Note what the master of ``slot`` answered to ``INFO replication``."""
        if not isinstance(info, Mapping):
            return
        online = online_replicas(info)
        replid = str(info.get("master_replid", ""))
        self._replicas[slot] = (online, time.monotonic(), replid)
        if online > self._had.get(replid, 0):
            self._had[replid] = online

    async def confirmed(self, calls: RedisCalls, slot: str) -> bool:
        """Whether the replicas asked for have what the last transaction on ``slot`` applied.

        True without a round trip when no replica is asked for, or the master
        never had one online. A WAIT that fails (Redis away) counts as not
        confirmed: the ops go again.
        """
        wanted = self.needed(slot)
        if not wanted:
            if self._unconfirmed:
                # Said once: before, the "not confirmed" line stood while ticks
                # went through unwaited (a promoted replica without replicas).
                self._unconfirmed = False
                self._logger.info(
                    "Writes count as written without a replica again: "
                    "this master never had one online"
                )
            return True
        online, _, replid = self._replicas.get(slot, (None, 0.0, ""))
        try:
            acked = await calls.command("WAIT", wanted, self.timeout_ms, retry=False, writes=False)
        except Exception:  # noqa: BLE001 - away or refused: logged by the call path
            return False
        ok = int(acked) >= wanted
        if not ok:
            # A failover may have changed the master: read INFO with the next tick.
            self._replicas[slot] = (online, 0.0, replid)
        if ok == self._unconfirmed:  # a change of state: one line each way
            if ok:
                self._logger.info("Writes are confirmed by %d replica(s) again", wanted)
            else:
                lost = ""
                if (online or 0) < wanted:
                    lost = f"; the master has {online or 0} of the {wanted} it had online"
                self._logger.warning(
                    "Writes not confirmed by %d replica(s) within %d ms (%d did): "
                    "sending them again until they are%s",
                    wanted,
                    self.timeout_ms,
                    int(acked),
                    lost,
                )
            self._unconfirmed = not ok
        return ok
