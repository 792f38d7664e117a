"""What Redis refused inside one tick's EXEC (frontier/write_behind/refusals.py): the kinds kept,
the wait, and one log line per state change."""

from __future__ import annotations

import logging

from redis.exceptions import OutOfMemoryError, ResponseError

from spiders_project.frontier.write_behind.ops import ACK, ENQUEUE, ITEM
from spiders_project.frontier.write_behind.refusals import Refusals
from spiders_project.redis_access import RedisState

LOG = logging.getLogger("test.refusals")
SPANS = [(ITEM, 0, 1, "RPUSH items"), (ENQUEUE, 1, 3, "script enqueue"), (ACK, 3, 4, "script ack")]
WRONGTYPE = ResponseError("WRONGTYPE Operation against a key holding the wrong kind of value")
OOM = OutOfMemoryError("command not allowed when used memory > 'maxmemory'.")


def state() -> RedisState:
    return RedisState("redis://127.0.0.1:1/0", 0.01, 0.5, LOG)


def test_a_refused_command_fails_its_kind_alone_logged_once_until_it_passes(caplog) -> None:
    refusals, redis_state = Refusals(LOG), state()
    with caplog.at_level(logging.INFO, logger=LOG.name):
        for _ in range(2):
            failed, delay = refusals.failed_kinds(SPANS, [WRONGTYPE, 1, 1, 1], redis_state)
            assert (failed, delay) == ({ITEM}, redis_state.backoff_max)
        assert refusals.failed_kinds(SPANS, [1, 1, 1, 1], redis_state) == (set(), 0.0)
    assert caplog.messages == [
        f"Redis refused RPUSH items: ResponseError: {WRONGTYPE}; keeping those writes and retrying",
        f"Redis took the writes it had refused (RPUSH items: ResponseError: {WRONGTYPE})",
    ]


def test_refused_writes_back_off_through_the_shared_state() -> None:
    """OOM in the enqueue scripts: the state logs it and doubles its wait; the rest is applied."""
    refusals, redis_state = Refusals(LOG), state()
    failed, delay = refusals.failed_kinds(SPANS, [1, 1, OOM, 1], redis_state)
    assert (failed, delay) == ({ENQUEUE}, 0.01) and not redis_state.writable
    assert refusals.failed_kinds(SPANS, [1, OOM, 1, 1], redis_state) == ({ENQUEUE}, 0.02)
    assert refusals.failed_kinds(SPANS, [1, 1, 1, 1], redis_state) == (set(), 0.0)
    assert redis_state.writable


def test_acks_alone_do_not_prove_redis_takes_writes_again() -> None:
    """ack.lua runs even out of memory: a tick of acks alone leaves the state refusing writes."""
    refusals, redis_state = Refusals(LOG), state()
    refusals.failed_kinds(SPANS, [1, OOM, 1, 1], redis_state)
    assert refusals.failed_kinds([(ACK, 0, 1, "script ack")], [1], redis_state) == (set(), 0.0)
    assert not redis_state.writable
    refusals.failed_kinds(SPANS, [1, 1, 1, 1], redis_state)
    assert redis_state.writable
