"""The Redis users of the cluster, one per role, and the ACL file that declares them.

Every process logs in as the user ``REDIS_URL`` names
(``redis://crawler-worker:<password>@host/0``); ``scrapy redis-acl`` prints
the file ``redis-server --aclfile`` loads (``acl_file``), and each process
checks at start that its user may run what it runs (``acl_check.py``).

Each user gets only the commands its role sends, Lua scripts' own
``redis.call`` commands included (Redis checks those against the user that
runs the script, commands and keys alike), and only its spiders' keys:
``<spider>:*`` (``{<spider>}:*`` and the frontier shards' ``{<spider>/<n>}:*``
on a Redis Cluster). The servers' own users, for a replica replicating and
for Sentinel, touch no key and are in the file when their passwords are set.
Where a key pattern cannot separate spiders is written down in
docs/SECURITY.md ("Redis users").
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from scrapy.settings import BaseSettings

from spiders_project.config import SettingsReader
from spiders_project.keys import SPIDERS, RedisKeys

# Commands of the scripts and the calls every role makes on connecting.
_CONNECT = ("ping", "select")
# What a Redis Cluster client asks of the cluster (redis-py: the slots, and
# COMMAND for the keys' positions; cluster.py: CLUSTER SLOTS), ASKING
# before the command an ASK redirect (a slot being migrated) names, and
# READONLY, which a client reading from replicas sends (ours do not).
_CLUSTER = ("cluster|slots", "cluster|shards", "command", "asking", "readonly")
# Run a script by SHA, load it after NOSCRIPT, or send its source (the dead
# letters' requeue sends EVAL inside MULTI).
_SCRIPTS = ("eval", "evalsha", "script|load")
# A transaction (the write batcher's tick) and the start check's MULTI ... DISCARD.
_TRANSACTION = ("multi", "exec", "discard")

# The worker (HTTP and render): every redis.call of frontier/, politeness/,
# proxies/, scope/, worker/ and redis_access/ scripts (tests/unit/test_acl.py
# reads them), and what its Python code sends: seeds (LRANGE, LREM), the
# spiders set (SADD), backpressure (LLEN), WAIT for replicas, INFO server (the
# run id that says Redis restarted), SCAN/UNLINK/DEL/HKEYS (SCHEDULER_FLUSH_ON_START),
# the cluster-idle reads (LLEN, GET, ZCARD), the seen-set's dynamic HGETALL/SMEMBERS,
# node health's reads of the other workers' stats (ZRANGE, HMGET), and the
# jobs' schedules (HGETALL, TIME, jobs/lua: HSET, LPUSH, XADD), the hosts
# an operator steers (HGETALL of <spider>:hosts:steering each second), and the
# job webhooks' consumer group on <spider>:jobs:events (jobs/webhook_delivery.py:
# XGROUP CREATE and DELCONSUMER, XINFO CONSUMERS, XREADGROUP, XPENDING, XCLAIM,
# XACK, XRANGE; SMEMBERS, SADD, PEXPIRE, DEL of the marks of who took an event).
WORKER_COMMANDS = (
    *_CONNECT,
    *_SCRIPTS,
    *_TRANSACTION,
    "bitfield",
    "decrby",
    "del",
    "exists",
    "expire",
    "get",
    "hdel",
    "hget",
    "hgetall",
    "hincrby",
    "hkeys",
    "hlen",
    "hmget",
    "hset",
    "incr",
    "incrby",
    "info",
    "lindex",
    "llen",
    "lpop",
    "lpush",
    "lrange",
    "lrem",
    "pexpire",
    "pttl",
    "rpush",
    "sadd",
    "scan",
    "set",
    "sismember",
    "smembers",
    "smismember",
    "srem",
    "time",
    "unlink",
    "wait",
    "xack",
    "xadd",
    "xclaim",
    "xgroup|create",
    "xgroup|delconsumer",
    "xinfo|consumers",
    "xpending",
    "xrange",
    "xreadgroup",
    "zadd",
    "zcard",
    "zcount",
    "zmscore",
    "zpopmin",
    "zrange",
    "zrangebyscore",
    "zrem",
    "zremrangebyscore",
    "zscore",
    # Read only, in jobs/lua/purge_job.lua, which the operator runs; the
    # worker's ACL test counts every jobs/lua script as the worker's.
    "zrangebylex",
)
# The db_writer: db_writer/lua's scripts (lock, take, ack), BLMOVE on the
# buffer (its wait for items), LLEN/LRANGE (recovery), SMEMBERS of the spiders
# set; TIME and LPUSH on start_urls for the revisits it pushes back (revisits.py).
DB_WRITER_COMMANDS = (
    *_CONNECT,
    *_SCRIPTS,
    "blmove",
    "del",
    "get",
    "hincrby",
    "hset",
    "llen",
    "lpush",
    "lrange",
    "ltrim",
    "pexpire",
    "rpush",
    "set",
    "smembers",
    "time",
)
# The monitor and ``scrapy crawlstatus``: cluster_view.py's and contract.py's reads, TIME,
# INFO; the console's: host_view.py (HGET, ZSCORE, STRLEN, PTTL), LRANGE (dead letters, a
# queue's head), XREVRANGE, ZSCAN/HSCAN (host_sweep.py). No write, no script (EVAL writes).
MONITOR_COMMANDS = (
    *_CONNECT,
    "exists",
    "get",
    "hget",
    "hgetall",
    "hscan",
    "info",
    "lindex",
    "llen",
    "lrange",
    "pttl",
    "scard",
    "strlen",
    "time",
    "xrevrange",
    "zcard",
    "zrange",
    "zscan",
    "zscore",
)
# The operator (seeding, crawlstatus, deadletters, dupefilter, crawlmove, jobs,
# frontier host: HSET/HDEL of the steering, politeness/lua/steer_host.lua): reads
# and writes of its spiders' keys by category, minus the dangerous ones (FLUSHALL,
# FLUSHDB, KEYS, CONFIG, DEBUG, SHUTDOWN, ACL, MONITOR, MIGRATE, RESTORE, SORT,
# ...) and the FUNCTION family; then the few it needs back (INFO is dangerous).
OPERATOR_RULES = (
    "+@read",
    "+@write",
    "+@keyspace",
    "+@transaction",
    "-@dangerous",
    "-function",
    *(f"+{c}" for c in (*_CONNECT, *_SCRIPTS, "info", "time", "wait")),
    # crawlmove writes what it DUMPed from the source with RESTORE (@dangerous:
    # a forged payload can crash a Redis that does not check it, so the
    # servers run with ``sanitize-dump-payload yes``: docs/SECURITY.md).
    "+restore",
)
# A replica logs in to its master (``masteruser``/``masterauth``) to replicate:
# what Redis' docs give a replication user. No key: the data comes by PSYNC.
REPLICA_COMMANDS = ("psync", "replconf", "ping")
# Sentinel on each server it watches (``sentinel auth-user``/``auth-pass``):
# Redis' docs' list. INFO and ROLE to watch; PUBLISH/SUBSCRIBE on its hello
# channel to find the other sentinels; at a failover MULTI, SLAVEOF, CONFIG
# REWRITE, CLIENT KILL (of the demoted master's clients), EXEC; SCRIPT KILL for
# a master stuck in a script; CLIENT SETNAME on its links. No key.
SENTINEL_COMMANDS = (
    "client|kill",
    "client|setname",
    "config|rewrite",
    "exec",
    "info",
    "multi",
    "ping",
    "publish",
    "role",
    "script|kill",
    "slaveof",
    "subscribe",
)
SENTINEL_CHANNEL = "__sentinel__:hello"

# Never granted to any role (tests/integration/test_redis_acl.py tries each).
FORBIDDEN = ("flushall", "flushdb", "config", "debug", "shutdown", "acl", "keys", "monitor")


@dataclass(frozen=True)
class Role:
    """One Redis user: its name, its password's setting, what it may run and touch."""

    name: str
    user: str
    password_setting: str
    # What the role does, for the file's comment.
    what: str
    # Explicit commands (lower case, "container|sub" for a subcommand) ...
    commands: tuple[str, ...] = ()
    # ... or category rules (the operator's).
    rules: tuple[str, ...] = ()
    # "%RW" (read and write, their cookie jars too) or "%R" (read only) on its spiders' keys.
    access: str = "%RW"
    # Key suffixes under the spider's prefix it may use; () for every key of the spider.
    suffixes: tuple[str, ...] = ()
    # ... and those it needs on a Redis Cluster only.
    cluster_suffixes: tuple[str, ...] = ()
    # Commands it may run on the spiders set (keys.SPIDERS), a key of no
    # spider, and how ("%R", "%W", "%RW"): a selector of its own.
    spiders_set: tuple[str, ...] = ()
    spiders_access: str = "%R"
    # Pub/sub channels it may use (the sentinel's hello channel).
    channels: tuple[str, ...] = ()
    # A server's own user (replica, sentinel): no key, no cluster commands,
    # and in the file only when its password is set.
    server: bool = False

    @property
    def writes(self) -> bool:
        return "W" in self.access


WORKER = Role(
    "worker",
    "crawler-worker",
    "REDIS_ACL_WORKER_PASSWORD",
    "HTTP and render workers (scrapy crawl)",
    commands=WORKER_COMMANDS,
    spiders_set=("sadd",),
    spiders_access="%W",
)
DB_WRITER = Role(
    "db_writer",
    "crawler-db-writer",
    "REDIS_ACL_DB_WRITER_PASSWORD",
    "the db_writer (python -m spiders_project.db_writer): the item buffer and its lock,"
    " and start_urls for revisits",
    # MULTI and DISCARD only for the start check (acl_check.py): it sends no transaction.
    commands=(*DB_WRITER_COMMANDS, "multi", "discard"),
    suffixes=("items", "items:*", "db_writer:*", "start_urls"),
    # On a Redis Cluster it reads the frontier's shard count at start, and
    # records it (SET NX) when it starts before any worker (shards.py).
    cluster_suffixes=("frontier:shards",),
    spiders_set=("smembers",),
)
MONITOR = Role(
    "monitor",
    "crawler-monitor",
    "REDIS_ACL_MONITOR_PASSWORD",
    "the Prometheus exporter (python -m monitor) and scrapy crawlstatus: reads only",
    commands=MONITOR_COMMANDS,
    access="%R",
)
OPERATOR = Role(
    "operator",
    "crawler-operator",
    "REDIS_ACL_OPERATOR_PASSWORD",
    "seeding and the commands (deadletters, dupefilter, crawlmove, crawlstatus, jobs, frontier)",
    rules=OPERATOR_RULES,
    # Never a category here: a selector's command with no key (KEYS is @read)
    # would be allowed whatever its key pattern.
    spiders_set=("smembers", "scard", "sadd", "srem"),
    spiders_access="%RW",
)
REPLICA = Role(
    "replica",
    "crawler-replica",
    "REDIS_ACL_REPLICA_PASSWORD",
    "a replica replicating its master (masteruser/masterauth)",
    commands=REPLICA_COMMANDS,
    access="",
    server=True,
)
SENTINEL = Role(
    "sentinel",
    "crawler-sentinel",
    "REDIS_ACL_SENTINEL_PASSWORD",
    "the sentinels watching the servers (sentinel auth-user/auth-pass)",
    commands=SENTINEL_COMMANDS,
    access="",
    channels=(SENTINEL_CHANNEL,),
    server=True,
)
# The crawler's roles: every file has them.
ROLES = (WORKER, DB_WRITER, MONITOR, OPERATOR)
# The servers' own users, for replication and Sentinel: in the file when their
# password is set.
SERVER_ROLES = (REPLICA, SENTINEL)


def role_named(name: str) -> Role:
    return next(role for role in (*ROLES, *SERVER_ROLES) if role.name == name)


def _glob(text: str) -> str:
    """``text`` with Redis' glob characters escaped."""
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)


def spider_patterns(keys: RedisKeys, suffixes: Sequence[str] = ()) -> list[str]:
    """The key patterns of one spider: its prefix (the shards' too on a
    cluster) and its seed list when ``redis_key`` puts it elsewhere."""
    prefixes = [_glob(keys.prefix)]
    if keys.cluster and not suffixes:
        # The frontier shards' tags, "{<spider>/<n>}" or "{<spider>/<n>.<k>}" (keys.shard_tag).
        prefixes.append("{" + _glob(keys.spider) + "/[0-9]*}:")
    patterns = [p + s for p in prefixes for s in (suffixes or ("*",))]
    if not suffixes and not keys.start_urls.startswith(keys.prefix):
        patterns.append(_glob(keys.start_urls))
        patterns.append(_glob(keys.start_urls_rejected))
    return patterns


def password_hash(password: str) -> str:
    """The ACL file's form of a password: ``#`` and its SHA-256 (the file holds no secret)."""
    return "#" + hashlib.sha256(password.encode()).hexdigest()


def user_line(role: Role, password: str, spider_keys: Iterable[RedisKeys], cluster: bool) -> str:
    """The ``user ...`` line of ``role`` for those spiders."""
    if not password:
        raise ValueError(f"{role.password_setting} is empty")
    parts = ["user", role.user, "reset", "on", password_hash(password), "-@all"]
    parts += role.rules
    parts += [f"+{c}" for c in role.commands + (_CLUSTER if cluster and not role.server else ())]
    if role.access:
        for keys in spider_keys:
            suffixes = role.suffixes + (role.cluster_suffixes if keys.cluster else ())
            jars = [f"cookies:{_glob(keys.prefix)}*"] if role.writes and not suffixes else []
            parts += [f"{role.access}~{p}" for p in spider_patterns(keys, suffixes) + jars]
    parts += [f"&{_glob(channel)}" for channel in role.channels]
    if role.spiders_set:
        # A selector: these commands on the spiders set, and nothing else on it.
        rights = " ".join("+" + c for c in role.spiders_set)
        parts.append(f"({role.spiders_access}~{SPIDERS} {rights})")
    return " ".join(parts)


@dataclass(frozen=True)
class AclConfig:
    """The roles' passwords (REDIS_ACL_*_PASSWORD; a server role's only when
    set) and whether keys are a cluster's."""

    passwords: dict[str, str]
    cluster: bool

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> AclConfig:
        read = SettingsReader(settings)
        passwords = {}
        for role in (*ROLES, *SERVER_ROLES):
            password = read.getstr(role.password_setting)
            if not password and role.server:
                continue  # no replica or Sentinel user asked for
            if not password:
                read.fail(role.password_setting, f"is empty: the {role.user} user needs a password")
            if any(c.isspace() for c in password):
                # Never echoed: it is a password.
                read.fail(
                    role.password_setting,
                    "must not hold white space (the ACL file splits at it)",
                    "(not shown)",
                )
            passwords[role.name] = password
        return cls(passwords, read.getbool("REDIS_CLUSTER"))


def acl_file(config: AclConfig, spider_keys: Sequence[RedisKeys]) -> str:
    """The ACL file for ``spider_keys``' spiders: the default user off, then one user per
    role, then the replica's and the sentinels' users when their passwords are set.

    No comments: Redis' ACL file takes ``user`` lines only (a ``#`` line
    aborts its start), so what each line is for is said in
    deploy/redis/README.md and docs/SECURITY.md.
    """
    lines = ["user default off"]
    for role in (*ROLES, *SERVER_ROLES):
        if role.name in config.passwords:
            password = config.passwords[role.name]
            lines.append(user_line(role, password, spider_keys, config.cluster))
    return "\n".join(lines) + "\n"
