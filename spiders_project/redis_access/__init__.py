"""The one Redis call path of a process: every answer classified, retried and counted here.

Workers (asyncio), the db_writer, the monitor and the commands (blocking) all
send their Redis calls through a :class:`RedisCalls` or :class:`SyncRedisCalls`
sharing one :class:`RedisState`. That state is the process' only view of
Redis' health, its only backoff policy and its only source of state-change
log lines. Every error Redis or the network can give is sorted into one of
five kinds (:func:`classify`, :class:`ErrorKind`):

- ``CONNECTION``: connection refused or lost, timeouts. Retried with backoff;
  logged once as ``Redis connection lost ...`` and once as ``Redis reconnected``.
- ``REFUSED_WRITES``: error replies after which the same call succeeds later
  without anyone changing it: OOM (maxmemory with noeviction), READONLY (a
  replica after a failover, or ``REPLICAOF``), MISCONF (snapshots failing),
  LOADING, BUSY (a long script), MASTERDOWN, NOREPLICAS (``min-replicas-to-write``
  and too few replicas: a master cut off from them). Retried with the same backoff;
  logged once as ``Redis refuses writes (OOM ...), retrying`` and once as
  ``Redis accepts writes again``. So a loop that meets one goes on, and
  keeps the writes of its tick.
- ``NOSCRIPT``: the script cache is empty (Redis restarted or flushed it):
  the script is loaded and the call sent again at once.
- ``NOPERM``: the user ``REDIS_URL`` names may not run this command or use
  this key (ACL). Retried with the same backoff, since an operator fixes it
  in Redis (``ACL SETUSER``, ``ACL LOAD``) without restarting anything;
  logged once per command and counted.
- ``CALLER``: anything else (WRONGTYPE, a Lua runtime error, a bad argument)
  is a bug or a broken key: logged with the command name and raised to the
  caller, never retried blindly.

Nothing here decides *what* to retry: each caller says whether a call may be
repeated (``retry=True`` loops until Redis takes it) or wants the failure back
as :class:`RedisUnavailable` with the backoff to wait (the write batcher keeps
its ops and tries again next tick).
"""

from spiders_project.redis_access.calls import RedisCalls, SyncRedisCalls, one_shot_calls
from spiders_project.redis_access.errors import (
    REFUSED_WRITE_CODES,
    REFUSES_READS_TOO,
    ErrorKind,
    RedisUnavailable,
    classify,
    error_code,
    error_text,
)
from spiders_project.redis_access.lua import LuaScript, load_lua
from spiders_project.redis_access.state import ALLOW_OOM, READ, WRITE, RedisState

__all__ = [
    "ALLOW_OOM",
    "READ",
    "REFUSED_WRITE_CODES",
    "REFUSES_READS_TOO",
    "WRITE",
    "ErrorKind",
    "LuaScript",
    "RedisCalls",
    "RedisState",
    "RedisUnavailable",
    "SyncRedisCalls",
    "classify",
    "error_code",
    "error_text",
    "load_lua",
    "one_shot_calls",
]
