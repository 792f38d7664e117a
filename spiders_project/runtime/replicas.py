"""Writes confirmed by replicas (``REDIS_WAIT_REPLICAS``): a WAIT after each tick that needs one.

The write batcher (``batcher.py``) counts a tick that carried requests, items
or acks as written only once ``WAIT`` says this many replicas have it, or all
connected ones if fewer: a failover to a replica that lacks them then loses
nothing a worker counted done. How many are connected, each slot's
transaction reads from ``INFO replication`` every ``REPLICAS_EVERY`` seconds,
in the same round trip as its writes: reading the count costs no round trip
of its own.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from spiders_project.redis_calls import RedisCalls

# Seconds between two reads of the master's connected replicas.
REPLICAS_EVERY = 5.0


class ReplicaWait:
    """The replicas whose confirmation writes wait for, and what each master says it has."""

    def __init__(self, wanted: int, timeout: float, logger: logging.Logger) -> None:
        # Replicas that must confirm writes (0: none).
        self.wanted = wanted
        self.timeout_ms = max(1, round(timeout * 1000))
        # The batcher's, so that these lines read as its own.
        self._logger = logger
        # By slot (frontier prefix): (connected replicas as last read, when).
        self._replicas: dict[str, tuple[int | None, float]] = {}
        self._unconfirmed = False

    def connected(self, slot: str) -> int | None:
        """Connected replicas of the master of ``slot``, as last read (None: not yet)."""
        return self._replicas.get(slot, (None, 0.0))[0]

    def read_due(self, slot: str) -> bool:
        """Whether the next transaction on ``slot`` should read ``INFO replication``."""
        return bool(self.wanted) and (
            time.monotonic() - self._replicas.get(slot, (None, 0.0))[1] >= REPLICAS_EVERY
        )

    def read(self, slot: str, info: Any) -> None:
        """Note what the master of ``slot`` answered to ``INFO replication``."""
        if isinstance(info, dict):
            self._replicas[slot] = (int(info.get("connected_slaves", 0)), time.monotonic())

    async def confirmed(self, calls: RedisCalls, slot: str) -> bool:
        """Whether the replicas asked for have what the last transaction on ``slot`` applied.

        True without a round trip when no replica is asked for, or none is
        connected. A WAIT that fails (Redis away) counts as not confirmed: the
        ops go again.
        """
        replicas = self.connected(slot)
        wanted = min(self.wanted, replicas or 0)
        if not wanted:
            return True
        try:
            acked = await calls.command("WAIT", wanted, self.timeout_ms, retry=False, writes=False)
        except Exception:  # noqa: BLE001 - away or refused: logged by the call path
            return False
        ok = int(acked) >= wanted
        if not ok:
            # A failover may have left fewer: ask again next tick.
            self._replicas[slot] = (replicas, 0.0)
        if ok == self._unconfirmed:  # a change of state: one line each way
            if ok:
                self._logger.info("Writes are confirmed by %d replica(s) again", wanted)
            else:
                self._logger.warning(
                    "Writes not confirmed by %d replica(s) within %d ms (%d did): "
                    "sending them again until they are",
                    wanted,
                    self.timeout_ms,
                    int(acked),
                )
            self._unconfirmed = not ok
        return ok
