"""What each role sends to Redis: the commands its user is granted, one list per role.

Each list is what the role's Lua scripts call (``redis.call``: Redis checks
those against the user running the script; tests/unit/test_acl.py reads the
scripts) and what its Python code sends, with the reason next to each group.
``acl.py`` makes the users of these lists and their key patterns.
"""

from __future__ import annotations

# Commands of the scripts and the calls every role makes on connecting.
_CONNECT = ("ping", "select")
# What a Redis Cluster client asks of the cluster (redis-py: the slots, and
# COMMAND for the keys' positions; cluster.py: CLUSTER SLOTS), ASKING
# before the command an ASK redirect (a slot being migrated) names, and
# READONLY, which a client reading from replicas sends (ours do not).
CLUSTER_COMMANDS = ("cluster|slots", "cluster|shards", "command", "asking", "readonly")
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
# XACK, XRANGE; SMEMBERS, SADD, PEXPIRE, DEL of the marks of who took an event),
# and the shared cookie jars (HGET of a jar's version, HGETALL, PEXPIRE on use).
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
# The db_writer: db_writer/lua's scripts (join, beat, take, ack, adopt, leave),
# BLMOVE on the buffer (its wait for items), LLEN/LRANGE (recovery), HGETALL of
# the writers' hash and GET of their leases (its look for gone writers),
# SMEMBERS of the spiders set; TIME and LPUSH on start_urls for the revisits
# it pushes back (revisits.py). SORT only as take.lua runs it, BY nosort with
# STORE into the writer's processing list: Redis refuses SORT's BY and GET
# patterns (reads of other keys) to a user without access to every key.
DB_WRITER_COMMANDS = (
    *_CONNECT,
    *_SCRIPTS,
    "blmove",
    "del",
    "get",
    "hdel",
    "hexists",
    "hgetall",
    "hincrby",
    "hset",
    "lindex",
    "llen",
    "lpush",
    "lrange",
    "ltrim",
    "rpush",
    "set",
    "smembers",
    "sort",
    "time",
)
# The monitor (and ``scrapy crawlstatus``): the reads of cluster_view.py and
# contract.py (the steered hosts' HGETALL among them, the cookie counts' HLEN
# and bounded HRANDFIELD), TIME and INFO memory;
# its console's bounded reads besides: one host (host_view.py: HGET, ZSCORE,
# STRLEN, PTTL), the newest dead letters and a queue's head (LRANGE), the
# newest job events (XREVRANGE), the hosts' sweep (ZSCAN, HSCAN of the frontier's host
# registries: host_sweep.py). No write, no script (EVAL counts its keys as written).
MONITOR_COMMANDS = (
    *_CONNECT,
    "exists",
    "get",
    "hget",
    "hgetall",
    "hlen",
    "hrandfield",
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
