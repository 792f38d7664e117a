"""The one Redis call path, against the real error replies of a real redis-server."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import textwrap
import threading
import time

import pytest
import redis
import redis.asyncio

from spiders_project.redis_access import (
    ErrorKind,
    LuaScript,
    RedisCalls,
    RedisState,
    RedisUnavailable,
    SyncRedisCalls,
    classify,
    error_code,
)
from tests.support.processes import ROOT

LOG = logging.getLogger("test.redis_calls")


@pytest.fixture
def state(redis_url) -> RedisState:
    return RedisState(redis_url, 0.05, 0.2, LOG)


@pytest.fixture
def oom(r):
    """Redis out of memory (maxmemory below what it uses, noeviction); lifted after the test."""
    r.config_set("maxmemory-policy", "noeviction")
    r.config_set("maxmemory", 1)
    yield
    r.config_set("maxmemory", 0)


def reply_error(call) -> Exception:
    try:
        call()
    except redis.RedisError as exc:
        return exc
    raise AssertionError("Redis accepted the call")


def test_real_error_replies_are_classified(r, oom):
    assert classify(reply_error(lambda: r.set("k", "v"))) is ErrorKind.REFUSED_WRITES
    # A script with flags is refused at its start under OOM, with the OOM code.
    script = "#!lua\nreturn redis.call('SET', KEYS[1], 'v')"
    assert classify(reply_error(lambda: r.eval(script, 1, "k"))) is ErrorKind.REFUSED_WRITES
    # A transaction with a write is refused whole (EXECABORT, raised as its cause).
    pipe = r.pipeline(transaction=True)
    pipe.rpush("list", "x").get("k")
    assert classify(reply_error(pipe.execute)) is ErrorKind.REFUSED_WRITES


def test_readonly_misconf_and_caller_errors(r):
    r.set("s", "v")
    assert classify(reply_error(lambda: r.lpush("s", "x"))) is ErrorKind.CALLER
    assert classify(reply_error(lambda: r.evalsha("0" * 40, 0))) is ErrorKind.NOSCRIPT
    assert classify(reply_error(lambda: r.eval("return redis.call('NOPE')", 0))) is (
        ErrorKind.CALLER
    )
    # An unmapped code keeps its text: MISCONF and BUSY are read from it.
    assert classify(redis.ResponseError("MISCONF Redis is configured to save RDB")) is (
        ErrorKind.REFUSED_WRITES
    )
    assert classify(redis.ResponseError("BUSY Redis is busy running a script")) is (
        ErrorKind.REFUSED_WRITES
    )
    assert classify(redis.ConnectionError("Connection refused")) is ErrorKind.CONNECTION
    r.config_set("replica-read-only", "yes")
    r.execute_command("REPLICAOF", "127.0.0.1", "1")  # nothing listens: data kept
    try:
        assert classify(reply_error(lambda: r.set("k", "v"))) is ErrorKind.REFUSED_WRITES
    finally:
        r.execute_command("REPLICAOF", "NO", "ONE")


def test_noreplicas_is_a_passing_refusal_on_every_path(start_redis):
    # A master with min-replicas-to-write and no replica: what one cut off from
    # them answers (tests/e2e/test_jepsen.py). Reads are still served.
    _, url = start_redis("--min-replicas-to-write", "1")
    r = redis.Redis.from_url(url)
    assert r.get("k") is None
    assert classify(reply_error(lambda: r.set("k", "v"))) is ErrorKind.REFUSED_WRITES
    flagged = "#!lua flags=allow-oom\nreturn redis.call('SET', 'k', 'v')"
    assert classify(reply_error(lambda: r.eval(flagged, 0))) is ErrorKind.REFUSED_WRITES
    assert classify(reply_error(lambda: r.eval("return redis.call('SET', 'k', 'v')", 0))) is (
        ErrorKind.REFUSED_WRITES
    )

    async def transaction() -> Exception:
        client = redis.asyncio.Redis.from_url(url)
        try:
            async with client.pipeline(transaction=True) as pipe:
                pipe.incrby("seq", 0).rpush("items", "x")
                await pipe.execute(raise_on_error=False)
        except redis.RedisError as exc:
            return exc
        finally:
            await client.aclose()
        raise AssertionError("Redis accepted the transaction")

    refused = asyncio.run(transaction())  # the batcher's tick, as EXECABORT
    assert classify(refused) is ErrorKind.REFUSED_WRITES
    assert error_code(refused) == "NOREPLICAS"
    r.close()


def test_busy_script_is_a_passing_refusal(start_redis):
    # A server of the test's own: it is reconfigured and kept busy.
    _, url = start_redis("--busy-reply-threshold", "50")
    r = redis.Redis.from_url(url)
    # Spins for 2 s of Redis' clock, whenever in the second it starts.
    spin = (
        "local t = redis.call('TIME') "
        "local stop = tonumber(t[1]) * 1000000 + tonumber(t[2]) + 2000000 "
        "repeat t = redis.call('TIME') "
        "until tonumber(t[1]) * 1000000 + tonumber(t[2]) >= stop return 1"
    )
    thread = threading.Thread(target=lambda: redis.Redis.from_url(url).eval(spin, 0))
    thread.start()
    try:
        # Wait until the script runs: until then GET answers normally.
        deadline = time.monotonic() + 1.5
        while True:
            try:
                r.get("k")
            except redis.RedisError as exc:
                assert classify(exc) is ErrorKind.REFUSED_WRITES, exc
                break
            assert time.monotonic() < deadline, "the script never made Redis busy"
            time.sleep(0.01)
    finally:
        thread.join()
        r.close()


def test_sync_calls_wait_out_oom_and_log_each_change_once(redis_url, r, state, oom, caplog):
    calls = SyncRedisCalls(r, state)
    refused: list[str] = []  # a worker counts each in redis/writes_refused/<code>
    state.on_refused_writes.append(refused.append)
    lift = threading.Timer(0.6, lambda: redis.Redis.from_url(redis_url).config_set("maxmemory", 0))
    lift.start()
    with caplog.at_level(logging.INFO, logger=LOG.name):
        assert calls.command("SET", "k", "v") is True
    lines = [rec.getMessage() for rec in caplog.records]
    assert sum("Redis refuses writes (OOM" in line for line in lines) == 1, lines
    assert sum(line == "Redis accepts writes again" for line in lines) == 1, lines
    assert refused and set(refused) == {"OOM"}
    assert state.connected and state.writable


def test_retry_false_gives_the_failure_back_with_its_backoff(r, state, oom):
    calls = SyncRedisCalls(r, state)
    with pytest.raises(RedisUnavailable) as first:
        calls.command("SET", "k", "v", retry=False)
    with pytest.raises(RedisUnavailable) as second:
        calls.command("SET", "k", "v", retry=False)
    assert first.value.delay == 0.05 and second.value.delay == 0.1
    assert not state.writable
    assert calls.command("GET", "k", writes=False) is None  # reads still work
    assert not state.writable, "a read proves nothing about writes"


def test_caller_errors_are_logged_with_the_command_and_raised(r, state, caplog):
    r.set("s", "v")
    calls = SyncRedisCalls(r, state)
    refused: list[str] = []
    state.on_refused_writes.append(refused.append)
    with caplog.at_level(logging.ERROR, logger=LOG.name), pytest.raises(redis.ResponseError):
        calls.command("LPUSH", "s", "x")
    assert any("Redis refused LPUSH: ResponseError: WRONGTYPE" in m for m in caplog.messages)
    # Not Redis' trouble: no lost connection, no refused write counted.
    assert state.connected and state.writable and refused == []


def test_noscript_reloads_the_script(r, state):
    script = LuaScript("echo", "return ARGV[1]")
    calls = SyncRedisCalls(r, state)
    assert calls.script(script, [], ["a"]) == b"a"
    r.script_flush()
    assert calls.script(script, [], ["b"]) == b"b"


def test_async_calls_survive_a_connection_loss_and_tell_subscribers(redis_url, r, state):
    reconnected: list[bool] = []
    state.on_reconnect.append(lambda: reconnected.append(True))

    async def main() -> None:
        client = redis.asyncio.Redis.from_url(redis_url, retry=None)
        calls = RedisCalls(client, state)
        await calls.command("SET", "k", "1")
        r.client_kill_filter(_type="normal", skipme=True)
        assert await calls.command("GET", "k", writes=False) == b"1"
        await client.aclose()

    asyncio.run(main())
    assert reconnected == [True] and state.connected


def test_a_background_loop_that_ends_exits_the_process_loudly():
    code = textwrap.dedent(
        """
        import asyncio, logging
        from spiders_project.plumbing.tasks import spawn_loop

        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")

        async def refill():
            await asyncio.sleep(0.05)
            raise LookupError("unknown encoding: nope")

        async def main():
            spawn_loop("frontier refill", refill())
            await asyncio.sleep(5)
            print("still running")

        asyncio.run(main())
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 70
    assert "still running" not in done.stdout
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert lines == [
        "CRITICAL Background loop frontier refill ended unexpectedly (LookupError: unknown "
        "encoding: nope); exiting with status 70 so the supervisor restarts this worker"
    ]


def test_a_cancelled_loop_is_not_a_death():
    async def main() -> None:
        from spiders_project.plumbing.tasks import spawn_loop, stop_tasks

        task = spawn_loop("idle", asyncio.sleep(10))
        await asyncio.sleep(0.01)
        await stop_tasks([task])
        assert task.cancelled()

    asyncio.run(main())
