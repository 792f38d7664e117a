"""At start, whether this process' Redis user may run what the process runs.

``ACL DRYRUN`` would say it, but needs the ACL permission no role has. Redis
checks a command's ACL when it is queued inside MULTI, before anything runs:
so a role that writes sends ``MULTI``, then each command it runs (with
harmless arguments, on one of its keys), then ``DISCARD``; nothing is
executed, and each command is answered ``QUEUED`` or ``NOPERM``. A read-only
role sends its reads as they are (reading a key that does not exist changes
nothing). Two round trips, once, at start.

Scripts' own ``redis.call`` commands are among the commands probed: Redis
checks them against the user when the script runs.

It asks the servers the process will use: with Sentinel, the master the
sentinels name (the process' own client); on a Redis Cluster, where every
node has its own users, the master of the spider's slot and every other
master, with a shard key that master serves: the frontier's for the roles
that use the whole frontier, the item buffer's for the db_writer.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import redis
from scrapy.settings import BaseSettings

from spiders_project.keys import SPIDERS, RedisKeys
from spiders_project.keys.cookies import cookie_jar
from spiders_project.keys.db_writers import lease, processing_of, writers
from spiders_project.redis_access.acl import DB_WRITER, MONITOR, OPERATOR, WORKER, Role, role_named
from spiders_project.redis_access.connection import RedisConfig, sync_client
from spiders_project.redis_access.errors import is_noperm

logger = logging.getLogger(__name__)

_SCRIPT = "return 0"
_SCRIPT_SHA = "ffffffffffffffffffffffffffffffffffffffff"


def _key_args(name: str, key: str) -> tuple[Any, ...] | None:
    """Arguments of a harmless ``name`` on ``key`` (never run: queued, then discarded)."""
    one = {
        "bitfield": ("GET", "u8", 0),
        "blmove": (key, "LEFT", "LEFT", 0.001),
        "decrby": (0,),
        "expire": (1,),
        "hdel": ("f",),
        "hexists": ("f",),
        "hget": ("f",),
        "hincrby": ("f", 0),
        "hset": ("f", "0"),
        "incrby": (0,),
        "lindex": (0,),
        "lpush": ("0",),
        "lrange": (0, 0),
        "lrem": (0, "0"),
        "ltrim": (0, -1),
        "pexpire": (1,),
        "restore": (0, "x"),
        "rpush": ("0",),
        "sadd": ("0",),
        "set": ("0",),
        "sort": ("BY", "nosort", "LIMIT", 0, 1, "STORE", key),
        "sismember": ("0",),
        "srem": ("0",),
        "xack": ("g", "0-1"),
        "xadd": ("MAXLEN", "~", 1, "*", "f", "0"),
        "xclaim": ("g", "c", 0, "0-1"),
        "xgroup|create": ("g", "$"),
        "xgroup|delconsumer": ("g", "c"),
        "xinfo|consumers": ("g",),
        "xpending": ("g",),
        "xrange": ("-", "+"),
        "xrevrange": ("+", "-", "COUNT", 1),
        "sscan": (0,),
        "hscan": (0,),
        "zscan": (0,),
        "zadd": (0, "0"),
        "zcount": (0, 0),
        "zrange": (0, 0),
        "zrangebyscore": (0, 0),
        "zrem": ("0",),
        "zremrangebyscore": (0, 0),
        "zscore": ("0",),
    }
    keyless = {
        "eval": (_SCRIPT, 1, key),
        "evalsha": (_SCRIPT_SHA, 1, key),
        "script|load": (_SCRIPT,),
        "info": ("server",),
        "wait": (0, 0),
        # The key after STREAMS: the command's own key, not its first argument.
        "xreadgroup": ("GROUP", "g", "c", "STREAMS", key, ">"),
        "scan": (0, "COUNT", 1),
        "time": (),
        "ping": (),
        "cluster|slots": (),
        "cluster|shards": (),
        "command": ("COUNT",),
    }
    if name in keyless:
        return keyless[name]
    if name in ("multi", "exec", "discard", "select"):
        return None  # the probe's own frame, or sent by the client only when needed
    return (key, *one.get(name, ()))


def probes(role: Role, keys: RedisKeys, cluster: bool) -> list[tuple[Any, ...]]:
    """The commands that show whether ``role`` may do its job on ``keys``' spider."""
    key = {
        WORKER.name: keys.requests_size,
        DB_WRITER.name: keys.items,
        MONITOR.name: keys.requests_size,
        OPERATOR.name: keys.start_urls,
    }[role.name]
    names = list(role.commands) or list(OPERATOR_NEEDS)
    if cluster:
        names.append("cluster|slots")
    found: list[tuple[Any, ...]] = []
    for name in names:
        args = _key_args(name, key)
        if args is not None:
            found.append((*name.upper().split("|"), *args))
    # The other keys it must reach: the seed list, the lock, the items, the cookie
    # jars (outside the spider's prefix: a file made before they were misses them).
    jar = cookie_jar(keys, "default")
    if role is WORKER:
        found += [("LREM", keys.start_urls, 0, "0"), ("SET", keys.seen, "0")]
        found += [("HGETALL", jar), ("EVAL", _SCRIPT, 1, jar)]
    elif role is DB_WRITER:
        # Its lease, its processing list, the writers' hash, and the previous
        # release's list it takes over.
        found += [("SET", lease(keys, "0"), "0"), ("HSET", writers(keys), "f", "0")]
        found += [("RPUSH", processing_of(keys, "0"), "0"), ("DEL", keys.items_processing)]
        found.append(("GET", keys.db_writer_lock))
        found.append(("LPUSH", keys.start_urls, "0"))  # revisits (db_writer/revisits.py)
        if cluster:  # shards.spider_keys reads and may record the shard count
            found += [("GET", keys.frontier_shards), ("SET", keys.frontier_shards, "0", "NX")]
    elif role is MONITOR:
        found += [("LLEN", keys.start_urls), ("LLEN", keys.items)]
    else:
        found += [("LPUSH", keys.start_urls, "0"), ("LPUSH", keys.dead, "0")]
        found += [("HSCAN", jar, 0), ("UNLINK", jar)]
    return found


# What the commands run, of the operator's categories.
OPERATOR_NEEDS = (
    "del",
    "eval",
    "evalsha",
    "exists",
    "get",
    "hset",
    "info",
    "llen",
    "lpush",
    "lrange",
    "lrem",
    "pttl",
    "restore",
    "rpush",
    "scan",
    "script|load",
    "set",
    "sscan",
    "time",
    "zadd",
)


def _spiders_probe(role: Role) -> tuple[Any, ...] | None:
    if role is WORKER:
        return ("SADD", SPIDERS, "0")
    if role is DB_WRITER:
        return ("SMEMBERS", SPIDERS)
    return None


class _MultiRefused(Exception):
    """MULTI itself was refused: nothing can be probed safely."""

    def __init__(self, reply: BaseException) -> None:
        super().__init__(str(reply))
        self.reply = reply


def _ask(client: redis.Redis, commands: Sequence[tuple[Any, ...]], wrap: bool) -> list[Any]:
    """Each command's reply, or its error (as an exception object); inside MULTI ... DISCARD
    when ``wrap``, MULTI first on its own (were it refused, the rest would run)."""
    conn = client.connection_pool.get_connection()
    try:

        def send(batch: Sequence[tuple[Any, ...]]) -> list[Any]:
            conn.send_packed_command(conn.pack_commands(batch))
            replies: list[Any] = []
            for _ in batch:
                try:
                    replies.append(conn.read_response(disable_decoding=True))
                except redis.ResponseError as exc:
                    replies.append(exc)
            return replies

        if not wrap:
            return send(commands)
        (opened,) = send([("MULTI",)])
        if isinstance(opened, Exception):
            raise _MultiRefused(opened)
        return send([*commands, ("DISCARD",)])[:-1]
    except BaseException:
        conn.disconnect()
        raise
    finally:
        client.connection_pool.release(conn)


def _what(command: tuple[Any, ...], exc: BaseException) -> str:
    """The command (and key) a NOPERM reply refused, for the line."""
    name = str(command[0])
    if name in ("SCRIPT", "CLUSTER"):
        return f"{name} {command[1]}"
    if "keys" in str(exc):
        return f"{name} on key {command[3] if name in ('EVAL', 'EVALSHA') else command[1]}"
    return name


def permission_problem(
    settings: BaseSettings,
    role_name: str,
    spiders: Sequence[RedisKeys],
) -> str | None:
    """None when this process' Redis user may do ``role_name``'s job for ``spiders``,
    else the one line that names what it lacks. A Redis that does not answer
    raises (``redis.RedisError``, ``OSError``): the caller says so its own way."""
    role = role_named(role_name)
    config = RedisConfig.from_settings(settings)
    user = redis.connection.parse_url(config.url).get("username") or "default"
    if user == "default":
        # No user named: a Redis without the users of `scrapy redis-acl` (which
        # switch the default user off), where every process has every right.
        return None
    client = sync_client(settings)
    missing: list[str] = []
    try:
        groups: list[tuple[str, list[tuple[Any, ...]]]] = []
        for keys in spiders:
            groups.append((keys.prefix, probes(role, keys, config.cluster)))
            if config.cluster and not role.suffixes:
                # Its frontier shards' keys are on the other masters too.
                for prefix in _shard_prefixes(client, keys):
                    key = prefix + keys.requests_size[len(keys.prefix) :]
                    groups.append((key, _shard_probes(role, key)))
            elif config.cluster and role.shard_suffixes:
                # The shards' item buffers (the db_writer's) are on the other masters too.
                for prefix in _shard_prefixes(client, keys):
                    groups.append((prefix, _buffer_probes(role, keys, prefix)))
        spiders_probe = _spiders_probe(role)
        if spiders_probe is not None:
            groups.append((SPIDERS, [spiders_probe]))
        for slot_key, commands in groups:
            node = _node_of(client, slot_key) if config.cluster else client
            try:
                replies = _ask(node, commands, role.writes)
            except _MultiRefused as exc:
                if not is_noperm(exc.reply):
                    raise exc.reply from None
                missing.append("MULTI")
                break
            for command, reply in zip(commands, replies, strict=True):
                if isinstance(reply, redis.ResponseError) and is_noperm(reply):
                    what = _what(command, reply)
                    if what not in missing:
                        missing.append(what)
    finally:
        client.close()
    if not missing:
        return None
    return (
        f"Redis user {user!r} may not run what the {role.name} needs: "
        f"{', '.join(missing)} (NOPERM; give it the {role.user} user of `scrapy redis-acl`)"
    )


def _shard_probes(role: Role, key: str) -> list[tuple[Any, ...]]:
    """``role``'s commands on ``key``, a frontier shard's key on another master."""
    names = list(role.commands) or list(OPERATOR_NEEDS)
    found = [(*n.upper().split("|"), *a) for n in names if (a := _key_args(n, key)) is not None]
    return found


def _buffer_probes(role: Role, keys: RedisKeys, prefix: str) -> list[tuple[Any, ...]]:
    """``role``'s commands beside a frontier shard's item buffer (``prefix``, a
    shard's tag): on the buffer, and on what a db_writer keeps beside it."""

    def moved(key: str) -> str:
        return prefix + key[len(keys.prefix) :]

    found = _shard_probes(role, moved(keys.items))
    found += [("SET", moved(lease(keys, "0")), "0"), ("HSET", moved(writers(keys)), "f", "0")]
    found += [("RPUSH", moved(processing_of(keys, "0")), "0"), ("GET", moved(keys.db_writer_lock))]
    return found


def _shard_prefixes(client: Any, keys: RedisKeys) -> list[str]:
    """A frontier shard's prefix (``{<spider>/<n>}:``) on each master of the cluster
    but the one of ``keys.prefix``: the ACL file is each node's own, and a worker,
    the monitor and the commands use every shard, and the db_writer every shard's
    item buffer, so every master."""
    home = client.get_node_from_key(keys.prefix).name
    wanted = {node.name for node in client.get_primaries()} - {home}
    found: list[str] = []
    n = 0
    while wanted and n < 100_000:
        prefix = "{" + f"{keys.spider}/{n}" + "}:"
        name = client.get_node_from_key(prefix).name
        if name in wanted:
            wanted.discard(name)
            found.append(prefix)
        n += 1
    return found


def _node_of(client: Any, key: str) -> redis.Redis:
    """The client of the master of ``key``'s slot, on a Redis Cluster."""
    node = client.get_node_from_key(key)
    found: redis.Redis = client.get_redis_connection(node)
    return found
