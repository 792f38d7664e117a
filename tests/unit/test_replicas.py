"""Writes confirmed by replicas (frontier/write_behind/replicas.py): when INFO is read, when WAIT
is asked, and one log line each way."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from spiders_project.frontier.write_behind import replicas
from spiders_project.frontier.write_behind.replicas import ReplicaWait

LOG = logging.getLogger("test.replicas")
SLOT = "s:"


class Calls:
    """Answers WAIT with ``acked`` (an exception: raised), and records the calls."""

    def __init__(self, acked: Any) -> None:
        self.acked = acked
        self.waits: list[tuple[Any, ...]] = []

    async def command(self, *args: Any, **kwargs: Any) -> Any:
        self.waits.append(args)
        if isinstance(self.acked, Exception):
            raise self.acked
        return self.acked


def confirmed(wait: ReplicaWait, calls: Calls) -> bool:
    return asyncio.run(wait.confirmed(calls, SLOT))  # type: ignore[arg-type]


def test_info_is_read_first_then_every_replicas_every(monkeypatch) -> None:
    now = [100.0]
    monkeypatch.setattr(replicas.time, "monotonic", lambda: now[0])
    wait = ReplicaWait(1, 0.2, LOG)
    assert wait.connected(SLOT) is None and wait.read_due(SLOT)
    wait.read(SLOT, {"connected_slaves": 2})
    assert wait.connected(SLOT) == 2 and not wait.read_due(SLOT)
    now[0] += replicas.REPLICAS_EVERY
    assert wait.read_due(SLOT)
    wait.read(SLOT, b"not a dict")  # kept as it was
    assert wait.connected(SLOT) == 2
    assert not ReplicaWait(0, 0.2, LOG).read_due(SLOT), "no replica asked for: never read"


def test_no_round_trip_without_a_replica_connected_or_asked_for() -> None:
    calls = Calls(0)
    assert confirmed(ReplicaWait(1, 0.2, LOG), calls)  # not read yet
    wait = ReplicaWait(1, 0.2, LOG)
    wait.read(SLOT, {"connected_slaves": 0})
    assert confirmed(wait, calls) and calls.waits == []


def test_wait_asks_for_the_connected_replicas_if_fewer(caplog) -> None:
    wait = ReplicaWait(3, 0.2, LOG)
    wait.read(SLOT, {"connected_slaves": 2})
    calls = Calls(2)
    with caplog.at_level(logging.INFO, logger=LOG.name):
        assert confirmed(wait, calls)
    assert calls.waits == [("WAIT", 2, 200)] and caplog.messages == []


def test_unconfirmed_writes_log_once_each_way_and_read_info_again(caplog) -> None:
    wait = ReplicaWait(1, 0.2, LOG)
    wait.read(SLOT, {"connected_slaves": 1})
    with caplog.at_level(logging.INFO, logger=LOG.name):
        assert not confirmed(wait, Calls(0))
        assert wait.read_due(SLOT), "a failover may have left fewer: read again"
        assert wait.connected(SLOT) == 1
        assert not confirmed(wait, Calls(0))
        assert confirmed(wait, Calls(1))
    assert caplog.messages == [
        "Writes not confirmed by 1 replica(s) within 200 ms (0 did): "
        "sending them again until they are",
        "Writes are confirmed by 1 replica(s) again",
    ]


@pytest.mark.parametrize("error", [ConnectionError("away"), RuntimeError("refused")])
def test_a_wait_that_fails_is_not_a_confirmation(error: Exception) -> None:
    wait = ReplicaWait(1, 0.2, LOG)
    wait.read(SLOT, {"connected_slaves": 1})
    assert not confirmed(wait, Calls(error))


def test_a_master_that_lost_its_replicas_still_waits_for_them(caplog) -> None:
    # The Jepsen case: the master cut off from its replica still takes writes.
    wait = ReplicaWait(1, 0.2, LOG)
    wait.read(SLOT, {"master_replid": "old", "slave0": {"state": "online"}})
    wait.read(SLOT, {"master_replid": "old", "connected_slaves": 0})
    calls = Calls(0)
    with caplog.at_level(logging.INFO, logger=LOG.name):
        assert not confirmed(wait, calls)
    assert calls.waits == [("WAIT", 1, 200)]
    assert caplog.messages[0].endswith("; the master has 0 of the 1 it had online")
    # A replica promoted (its own replication id) that never had one waits for none.
    wait.read(SLOT, {"master_replid": "new", "connected_slaves": 0})
    assert confirmed(wait, calls) and len(calls.waits) == 1
    # Once one of its replicas is online, it waits for it.
    wait.read(SLOT, {"master_replid": "new", "slave0": {"state": "online"}})
    assert confirmed(wait, Calls(1))


def test_a_replica_counts_once_online_not_while_it_resyncs() -> None:
    wait = ReplicaWait(2, 0.2, LOG)
    resyncing = {"state": "wait_bgsave", "lag": 0}
    wait.read(SLOT, {"master_replid": "m", "connected_slaves": 1, "slave0": resyncing})
    assert wait.connected(SLOT) == 0 and wait.needed(SLOT) == 0
    calls = Calls(0)
    assert confirmed(wait, calls) and calls.waits == []
    wait.read(
        SLOT,
        {
            "master_replid": "m",
            "slave0": {"state": "online"},
            "slave1": "ip=10.0.0.3,port=6379,state=online,offset=5,lag=0",  # unparsed
            "slave_read_only": 1,  # not a replica's line
        },
    )
    assert wait.connected(SLOT) == 2 and wait.needed(SLOT) == 2


def test_online_replicas_counts_connected_slaves_without_lines() -> None:
    assert replicas.online_replicas({"connected_slaves": 3}) == 3
    assert replicas.online_replicas({}) == 0


def test_a_promoted_replica_without_replicas_takes_the_unconfirmed_line_back(caplog) -> None:
    wait = ReplicaWait(1, 0.2, LOG)
    wait.read(SLOT, {"master_replid": "old", "slave0": {"state": "online"}})
    with caplog.at_level(logging.INFO, logger=LOG.name):
        assert not confirmed(wait, Calls(0))
        wait.read(SLOT, {"master_replid": "new", "connected_slaves": 0})
        assert confirmed(wait, Calls(0))
        assert confirmed(wait, Calls(0))
    assert len(caplog.messages) == 2
    assert caplog.messages[1] == (
        "Writes count as written without a replica again: this master never had one online"
    )
