"""The one connection state of a process: backoff, refused writes, one log line per change.

Pure logic: errors are the exception objects redis-py raises for each reply
(tests/integration/test_redis_calls.py gets the same ones from a real server).
"""

from __future__ import annotations

import logging

import pytest
import redis
from redis.exceptions import BusyLoadingError, OutOfMemoryError, ReadOnlyError

from spiders_project.redis_access import ALLOW_OOM, READ, WRITE, RedisState

LOGGER = "test.redis_state"


@pytest.fixture
def state() -> RedisState:
    return RedisState("redis://:secret@db.example:6379/0", 0.1, 0.5, logging.getLogger(LOGGER))


def test_backoff_doubles_up_to_its_cap_and_resets_on_success(state):
    delays = [state.failed(redis.ConnectionError("down")) for _ in range(5)]
    assert delays == [0.1, 0.2, 0.4, 0.5, 0.5]
    state.ok()
    assert state.failed(redis.ConnectionError("down")) == 0.1


def test_a_lost_connection_is_one_line_each_way_and_tells_subscribers(state, caplog):
    told = []
    state.on_reconnect.append(lambda: told.append(1))
    with caplog.at_level(logging.INFO, logger=LOGGER):
        for _ in range(3):
            state.failed(redis.ConnectionError("Connection refused"))
        assert not state.connected
        state.answered(READ)
        state.answered(READ)
    assert caplog.messages == [
        "Redis connection lost (ConnectionError: Connection refused), reconnecting to "
        "redis://:***@db.example:6379/0",
        "Redis reconnected at redis://:***@db.example:6379/0",
    ]
    assert told == [1] and state.connected


def test_a_call_sent_before_the_last_recovery_that_times_out_is_no_new_loss(state, caplog):
    """A partition healed: a call sent during it (its TCP retry due after the heal)
    times out after another call got through. That is the old cut, not a new one."""
    with caplog.at_level(logging.INFO, logger=LOGGER):
        before_cut = state.epoch
        state.failed(redis.TimeoutError("Timeout reading from socket"), "EVALSHA", before_cut)
        during_cut = state.epoch
        state.answered(READ)  # the heal: another call got through
        state.failed(redis.TimeoutError("Timeout reading from socket"), "EVALSHA", during_cut)
        assert state.connected
        # A call sent after the recovery that fails is a new loss.
        state.failed(redis.TimeoutError("Timeout reading from socket"), "LPOP", state.epoch)
        assert not state.connected
    assert [m.split(" (")[0] for m in caplog.messages] == [
        "Redis connection lost",
        "Redis reconnected at redis://:***@db.example:6379/0",
        "Redis connection lost",
    ]


def test_oom_ends_with_a_write_not_with_a_read_or_an_allow_oom_script(state, caplog):
    with caplog.at_level(logging.INFO, logger=LOGGER):
        state.failed(OutOfMemoryError("command not allowed when used memory > 'maxmemory'."))
        state.failed(OutOfMemoryError("command not allowed when used memory > 'maxmemory'."))
        state.answered(READ)
        state.answered(ALLOW_OOM)
        assert not state.writable, "neither a read nor an allow-oom script proves OOM is over"
        state.answered(WRITE)
    assert state.writable
    assert caplog.messages == [
        "Redis refuses writes (OOM command not allowed when used memory > 'maxmemory'.), retrying",
        "Redis accepts writes again",
    ]


def test_readonly_ends_with_an_allow_oom_script_and_loading_with_any_answer(state):
    state.failed(ReadOnlyError("You can't write against a read only replica."))
    state.answered(READ)
    assert not state.writable
    state.answered(ALLOW_OOM)  # refused on a replica too: its success proves a master
    assert state.writable
    state.failed(BusyLoadingError("Redis is loading the dataset in memory"))
    state.answered(READ)  # LOADING refuses reads as well
    assert state.writable


def test_a_callers_error_is_logged_once_with_its_command_and_raised(state, caplog):
    wrong = redis.ResponseError("WRONGTYPE Operation against a key holding the wrong kind")
    told: list[str] = []
    state.on_refused_writes.append(told.append)
    state.on_noperm.append(told.append)
    with caplog.at_level(logging.INFO, logger=LOGGER):
        for _ in range(2):
            with pytest.raises(redis.ResponseError):
                state.failure("LLEN distributed:items", wrong)
    assert caplog.messages == [
        "Redis refused LLEN distributed:items: ResponseError: WRONGTYPE Operation against a key "
        "holding the wrong kind"
    ]
    # Redis is fine: no lost connection, nothing counted as refused.
    assert state.connected and state.writable and told == []


def test_a_backoff_policy_that_cannot_work_is_refused():
    with pytest.raises(ValueError, match="REDIS_RECONNECT_BACKOFF"):
        RedisState("redis://x", 1.0, 0.5, logging.getLogger(LOGGER))


def test_a_noperm_is_logged_once_per_command_counted_and_retried(caplog):
    state = RedisState(
        "redis://crawler-worker:pw@db.example:6379/0", 0.1, 0.5, logging.getLogger(LOGGER)
    )
    seen: list[str] = []
    state.on_noperm.append(seen.append)
    refused = redis.exceptions.NoPermissionError("no permissions to run the 'srem' command")
    with caplog.at_level(logging.INFO, logger=LOGGER):
        delays = [state.failure("script ack", refused) for _ in range(3)]
        state.failure("LLEN", refused)
    assert delays == [0.1, 0.2, 0.4]
    assert state.noperm == 4 and seen == ["script ack"] * 3 + ["LLEN"]
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2 and "Redis user 'crawler-worker' may not run script ack" in lines[0]
    assert "pw" not in " ".join(lines)
    # Neither a lost connection nor refused writes.
    assert state.connected and state.writable


def test_noreplicas_is_a_refused_write_logged_once_counted_each_time(state, caplog):
    # A master with min-replicas-to-write whose replicas are gone (the Jepsen case).
    codes: list[str] = []
    state.on_refused_writes.append(codes.append)
    noreplicas = redis.ResponseError("NOREPLICAS Not enough good replicas to write.")
    with caplog.at_level(logging.INFO, logger=LOGGER):
        for _ in range(3):
            state.failed(noreplicas, "MULTI/EXEC")
        state.answered(READ)  # a read proves nothing: reads are still served
        assert not state.writable
        state.answered(ALLOW_OOM)  # an allow-oom script is refused too: it passed
    assert codes == ["NOREPLICAS"] * 3
    assert caplog.messages == [
        "Redis refuses writes (NOREPLICAS Not enough good replicas to write.), retrying",
        "Redis accepts writes again",
    ]
