"""Every error a Redis call can raise has one kind, and its reply's code (redis_access/errors.py).

Pure logic: errors are the exception objects redis-py raises for each reply
(tests/integration/test_redis_calls.py gets the same ones from a real server).
"""

from __future__ import annotations

import pytest
import redis
from redis.exceptions import (
    BusyLoadingError,
    ClusterDownError,
    MovedError,
    NoPermissionError,
    NoScriptError,
    OutOfMemoryError,
    ReadOnlyError,
    RedisClusterException,
    TryAgainError,
)

from spiders_project.redis_access import (
    ErrorKind,
    classify,
    error_code,
    error_text,
)


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        (redis.ConnectionError("refused"), ErrorKind.CONNECTION),
        (redis.TimeoutError("slow"), ErrorKind.CONNECTION),
        (OSError("unreachable"), ErrorKind.CONNECTION),
        (
            OutOfMemoryError("command not allowed when used memory > 'maxmemory'"),
            ErrorKind.REFUSED_WRITES,
        ),
        (ReadOnlyError("You can't write against a read only replica."), ErrorKind.REFUSED_WRITES),
        (BusyLoadingError("Redis is loading the dataset in memory"), ErrorKind.REFUSED_WRITES),
        (redis.ResponseError("MISCONF Errors writing to disk"), ErrorKind.REFUSED_WRITES),
        (redis.ResponseError("MASTERDOWN Link with MASTER is down"), ErrorKind.REFUSED_WRITES),
        (
            redis.ResponseError("NOREPLICAS Not enough good replicas to write."),
            ErrorKind.REFUSED_WRITES,
        ),
        (NoScriptError("No matching script"), ErrorKind.NOSCRIPT),
        (redis.ResponseError("WRONGTYPE Operation against a key"), ErrorKind.CALLER),
        (ValueError("a bug"), ErrorKind.CALLER),
    ],
)
def test_every_error_has_one_kind(exc, kind):
    assert classify(exc) is kind


def test_error_code_reads_mapped_and_unmapped_replies():
    assert error_code(OutOfMemoryError("command not allowed", status_code="OOM")) == "OOM"
    assert error_code(ReadOnlyError("You can't write")) == "READONLY"  # without the parser's code
    assert error_code(redis.ResponseError("MISCONF Errors writing")) == "MISCONF"
    assert (
        error_code(redis.ResponseError("Command # 2 (EVALSHA) of pipeline caused error: BUSY x"))
        == "BUSY"
    )
    assert error_code(ValueError("lower case")) == ""
    # redis-py's asyncio pipeline puts the reply's args tuple after its prefix.
    queued = redis.ResponseError(
        "Command # 1 (INCRBY w:seq 0) of pipeline caused error: "
        "('NOREPLICAS Not enough good replicas to write.',)"
    )
    assert error_code(queued) == "NOREPLICAS" and classify(queued) is ErrorKind.REFUSED_WRITES
    assert error_text(queued) == "NOREPLICAS Not enough good replicas to write."


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        (ClusterDownError("CLUSTERDOWN The cluster is down"), ErrorKind.REFUSED_WRITES),
        (TryAgainError("TRYAGAIN"), ErrorKind.REFUSED_WRITES),
        (MovedError("3999 127.0.0.1:6381"), ErrorKind.CONNECTION),
        (RedisClusterException("Redis Cluster cannot be connected"), ErrorKind.CONNECTION),
    ],
)
def test_cluster_errors_pass(exc: Exception, kind: ErrorKind) -> None:
    assert classify(exc) is kind


def test_noperm_is_a_kind_of_its_own():
    # Retried like a lost connection, not raised: test_state.py.
    refused = NoPermissionError("this user has no permissions to run the 'srem' command")
    assert classify(refused) is ErrorKind.NOPERM
    assert error_code(refused) == "NOPERM"
    # Redis 7.0 words a script's refused command or key as an ERR reply.
    script = redis.ResponseError(
        "The user executing the script can't run this command or subcommand script: "
        "d530a22111e074618d24a380340dd3d8bc48af4a, on @user_script:1."
    )
    assert classify(script) is ErrorKind.NOPERM
    assert classify(redis.ResponseError("WRONGTYPE Operation against a key")) is ErrorKind.CALLER
