"""The Redis users of the cluster, one per role, and the ACL file that declares them.

Every process logs in as the user ``REDIS_URL`` names
(``redis://crawler-worker:<password>@host/0``); ``scrapy redis-acl`` prints
the file ``redis-server --aclfile`` loads (``acl_file``), and each process
checks at start that its user may run what it runs (``acl_check.py``).

Each user gets only the commands its role sends (``acl_commands.py``), Lua
scripts' own ``redis.call`` commands included (Redis checks those against the
user that runs the script, commands and keys alike), and only its spiders' keys:
``<spider>:*`` (``{<spider>}:*`` and the frontier shards' ``{<spider>/<n>}:*``
on a Redis Cluster). The spiders' cookie jars, ``cookies:<spider>:*``
(``cookies:{<spider>}:*``), are the worker's and the operator's only: they
hold session cookies, and the monitor reads only their counts. The servers'
own users, for a replica replicating and for Sentinel, touch no key and are
in the file when their passwords are set.
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
from spiders_project.redis_access.acl_commands import (
    CLUSTER_COMMANDS,
    DB_WRITER_COMMANDS,
    MONITOR_COMMANDS,
    OPERATOR_RULES,
    REPLICA_COMMANDS,
    SENTINEL_CHANNEL,
    SENTINEL_COMMANDS,
    WORKER_COMMANDS,
)


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
    # "%RW" (read and write) or "%R" (read only) on its spiders' keys.
    access: str = "%RW"
    # Key suffixes under the spider's prefix it may use; () for every key of the spider.
    suffixes: tuple[str, ...] = ()
    # ... and those it needs on a Redis Cluster only.
    cluster_suffixes: tuple[str, ...] = ()
    # Whether it may use the spiders' cookie jars (cookie_patterns), with ``access``.
    cookie_jars: bool = False
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
    cookie_jars=True,
    spiders_set=("sadd",),
    spiders_access="%W",
)
DB_WRITER = Role(
    "db_writer",
    "crawler-db-writer",
    "REDIS_ACL_DB_WRITER_PASSWORD",
    "the db_writer (python -m spiders_project.db_writer): the item buffer, the writers'"
    " processing lists and leases, and start_urls for revisits",
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
    "seeding and the commands (deadletters, dupefilter, crawlmove, crawlstatus, jobs, frontier,"
    " cookies)",
    rules=OPERATOR_RULES,
    cookie_jars=True,  # scrapy cookies list|clear
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


def cookie_patterns(keys: RedisKeys) -> list[str]:
    """The key pattern of one spider's cookie jars (``keys/cookies.py``):
    ``cookies:<prefix>*``, outside the spider's prefix so that a role given
    only that prefix (the monitor) never reads a cookie's value."""
    return [f"cookies:{_glob(keys.prefix)}*"]


def password_hash(password: str) -> str:
    """The ACL file's form of a password: ``#`` and its SHA-256 (the file holds no secret)."""
    return "#" + hashlib.sha256(password.encode()).hexdigest()


def user_line(role: Role, password: str, spider_keys: Iterable[RedisKeys], cluster: bool) -> str:
    """The ``user ...`` line of ``role`` for those spiders."""
    if not password:
        raise ValueError(f"{role.password_setting} is empty")
    parts = ["user", role.user, "reset", "on", password_hash(password), "-@all"]
    parts += role.rules
    parts += [
        f"+{c}" for c in role.commands + (CLUSTER_COMMANDS if cluster and not role.server else ())
    ]
    if role.access:
        for keys in spider_keys:
            suffixes = role.suffixes + (role.cluster_suffixes if keys.cluster else ())
            patterns = spider_patterns(keys, suffixes)
            if role.cookie_jars:
                patterns += cookie_patterns(keys)
            parts += [f"{role.access}~{p}" for p in patterns]
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
