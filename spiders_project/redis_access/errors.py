"""Which of five kinds an error of Redis or of the network is (see the package docstring).

One classification for every caller: the call paths (``calls.py``) retry or
raise by it, the connection state (``state.py``) logs by it, and the
commands word their one-line errors with ``error_code``/``error_text``.
"""

from __future__ import annotations

import enum
import re

import redis
from redis.exceptions import (
    AskError,
    BusyLoadingError,
    ClusterDownError,
    ClusterError,
    MasterDownError,
    NoPermissionError,
    NoScriptError,
    OutOfMemoryError,
    ReadOnlyError,
    RedisClusterException,
    TryAgainError,
)

# Error reply codes after which Redis takes the same write later by itself.
# UNBLOCKED ends a blocking call when a master turns replica: the call is
# refused for the same passing reason as READONLY. A Redis Cluster answers
# CLUSTERDOWN while a slot has no master (before a replica is promoted) and
# TRYAGAIN while a slot is being moved. NOREPLICAS is a master with
# min-replicas-to-write whose replicas are gone or lag (a master cut off from
# them, or one whose replica is promoted): the write is not taken, and is
# sent again once the replicas are back or the client reaches a new master.
REFUSED_WRITE_CODES = frozenset(
    {
        "OOM",
        "NOREPLICAS",
        "READONLY",
        "MISCONF",
        "LOADING",
        "BUSY",
        "MASTERDOWN",
        "UNBLOCKED",
        "CLUSTERDOWN",
        "TRYAGAIN",
    }
)

# Error replies that refuse reads too: a read that succeeds proves they passed.
REFUSES_READS_TOO = frozenset({"LOADING", "BUSY", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN"})

# redis-py rewrites the error of a command inside a pipeline to say which one;
# its asyncio client puts the reply's args tuple there, ``('NOREPLICAS ...',)``.
_PIPELINE_PREFIX = re.compile(r"^Command # \d+ \(.*?\) of pipeline caused error: ", re.DOTALL)
_ARGS_TUPLE = re.compile(r"^\((['\"])(.*)\1,\)$", re.DOTALL)

# The codes of the replies redis-py maps to classes of their own.
_MAPPED_CODES: tuple[tuple[type[BaseException], str], ...] = (
    (OutOfMemoryError, "OOM"),
    (ReadOnlyError, "READONLY"),
    (BusyLoadingError, "LOADING"),
    (MasterDownError, "MASTERDOWN"),
    (ClusterDownError, "CLUSTERDOWN"),
    (TryAgainError, "TRYAGAIN"),
    (NoPermissionError, "NOPERM"),
)

# Exceptions that mean the call did not reach Redis, or its answer did not come back.
_CONNECTION_EXCEPTIONS: tuple[type[BaseException], ...] = (
    redis.ConnectionError,
    redis.TimeoutError,
    ConnectionError,
    TimeoutError,
    OSError,
    # Redis Cluster: a slot that moved (redis-py's cluster client follows it
    # itself, a few times), a cluster no node of which answers, a slot map
    # being rebuilt. Retried: the client asks the cluster again.
    AskError,
    RedisClusterException,
)


# How Redis 7.0 words a script's command or key its user may not use: an ERR
# reply, not NOPERM (``ERR The user executing the script can't run this
# command or subcommand script: <sha>, on @user_script:<line>.``); later
# versions say ``ACL failure in script``.
_SCRIPT_ACL = re.compile(r"The user executing the script can't|ACL failure in script")


class ErrorKind(enum.Enum):
    CONNECTION = "connection"
    REFUSED_WRITES = "refused writes"
    NOSCRIPT = "noscript"
    # The user REDIS_URL names may not run this command or use this key (ACL):
    # retried with backoff, since an operator fixes it in Redis (ACL SETUSER,
    # ACL LOAD) without restarting anything; logged once per command and counted.
    NOPERM = "noperm"
    CALLER = "caller"


def error_text(exc: BaseException) -> str:
    """The error reply as Redis sent it, without redis-py's pipeline prefix."""
    # Errors raised from a transaction can carry more than one arg, and str()
    # of those is a tuple's repr.
    text = exc.args[0] if exc.args and isinstance(exc.args[0], str) else str(exc)
    stripped = _PIPELINE_PREFIX.sub("", text, count=1)
    if stripped != text:
        single = _ARGS_TUPLE.match(stripped)
        if single is not None:
            return single.group(2)
    return stripped


def error_code(exc: BaseException) -> str:
    """The error reply's code (``OOM``, ``READONLY``, ``WRONGTYPE``, ...), or ""."""
    code = getattr(exc, "status_code", None)
    if isinstance(code, str) and code:
        return code
    # A mapped class raised without the code redis-py's parser gives it.
    for cls, mapped in _MAPPED_CODES:
        if isinstance(exc, cls):
            return mapped
    # redis-py strips the codes it maps to a class and keeps the others in the text.
    first = error_text(exc).split(" ", 1)[0]
    return first if first.isupper() and first.isalpha() else ""


def is_noperm(exc: BaseException) -> bool:
    """Whether ``exc`` says the user may not run a command or use a key (ACL)."""
    if isinstance(exc, NoPermissionError):
        return True
    return isinstance(exc, redis.ResponseError) and (
        error_code(exc) == "NOPERM" or _SCRIPT_ACL.search(error_text(exc)) is not None
    )


def classify(exc: BaseException) -> ErrorKind:
    """Which of the five kinds (see the package docstring) ``exc`` is."""
    if isinstance(exc, NoScriptError):
        return ErrorKind.NOSCRIPT
    if is_noperm(exc):
        return ErrorKind.NOPERM
    # Mapped classes first: BusyLoadingError (LOADING) is a ConnectionError subclass.
    refusals = ReadOnlyError | OutOfMemoryError | BusyLoadingError | ClusterDownError
    if isinstance(exc, refusals | TryAgainError):
        return ErrorKind.REFUSED_WRITES
    if isinstance(exc, AskError):  # MOVED too (a subclass)
        return ErrorKind.CONNECTION
    if isinstance(exc, redis.ResponseError):
        code = error_code(exc)
        if code in REFUSED_WRITE_CODES:
            return ErrorKind.REFUSED_WRITES
        if code == "EXECABORT":
            # (A NOPERM at queue time aborts the transaction too: its cause says so.)
            # A transaction refused as a whole; redis-py raises the first queued
            # command's error instead when it has one, so this is rare.
            cause = exc.__cause__ or exc.__context__
            return classify(cause) if cause is not None else ErrorKind.REFUSED_WRITES
        return ErrorKind.CALLER
    if isinstance(exc, _CONNECTION_EXCEPTIONS + (ClusterError,)):
        return ErrorKind.CONNECTION
    return ErrorKind.CALLER


class RedisUnavailable(Exception):
    """A call failed for a reason that passes (connection, refused writes).

    ``delay`` is the backoff to wait before the next try; ``cause`` the error.
    """

    def __init__(self, cause: BaseException, delay: float) -> None:
        super().__init__(f"{type(cause).__name__}: {cause}")
        self.cause = cause
        self.delay = delay
