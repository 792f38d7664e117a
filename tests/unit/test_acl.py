"""acl.py: the users' lines, their key patterns, and that every script's command is granted."""

from __future__ import annotations

import fnmatch
import hashlib
import re
from pathlib import Path

import pytest
from scrapy.settings import Settings

from spiders_project.config import ConfigError, load_settings
from spiders_project.keys import RedisKeys
from spiders_project.keys.cookies import cookie_counts, cookie_jar
from spiders_project.keys.db_writers import filling, item_buffers, lease, processing_of, writers
from spiders_project.redis_access.acl import (
    DB_WRITER,
    MONITOR,
    OPERATOR,
    REPLICA,
    ROLES,
    SENTINEL,
    SERVER_ROLES,
    WORKER,
    AclConfig,
    acl_file,
    cookie_patterns,
    spider_patterns,
    user_line,
)
from spiders_project.redis_access.acl_check import probes
from spiders_project.redis_access.acl_commands import FORBIDDEN

PACKAGE = Path(__file__).resolve().parents[2] / "spiders_project"
CALL = re.compile(r"redis\.p?call\(\s*['\"]([A-Za-z]+)['\"]")
# seen.lua picks one of two commands at run time.
DYNAMIC = {"frontier": {"hgetall", "smembers", "hset", "sadd"}}


def _script_commands(*folders: str) -> set[str]:
    found: set[str] = set()
    for folder in folders:
        assert (PACKAGE / folder / "lua").is_dir(), folder
        for path in (PACKAGE / folder / "lua").glob("*.lua"):
            found |= {name.lower() for name in CALL.findall(path.read_text())}
        found |= DYNAMIC.get(folder, set())
    return found


def test_every_command_of_a_roles_scripts_is_granted_to_it():
    worker = _script_commands(
        "frontier", "politeness", "proxies", "scope", "worker", "redis_access", "jobs", "cookies"
    )
    assert worker - set(WORKER.commands) == set()
    assert (
        _script_commands("db_writer", "redis_access") - {"time"} - set(DB_WRITER.commands) == set()
    )


def test_no_role_is_granted_a_forbidden_command_or_a_write_to_the_monitor():
    for role in ROLES:
        assert not set(role.commands) & set(FORBIDDEN), role.name
    assert "-@dangerous" in OPERATOR.rules
    assert MONITOR.access == "%R" and not MONITOR.spiders_set
    assert not {"set", "eval", "evalsha", "del", "lpush", "multi"} & set(MONITOR.commands)
    # The console's sweep walks the host registries by ZSCAN/HSCAN, never the keyspace.
    assert {"zscan", "hscan"} <= set(MONITOR.commands) and "scan" not in MONITOR.commands


def test_patterns_are_one_spiders_keys_with_glob_characters_escaped():
    assert spider_patterns(RedisKeys("distributed")) == ["distributed:*"]
    assert spider_patterns(RedisKeys("a*b")) == ["a\\*b:*"]
    cluster = RedisKeys("distributed", cluster=True)
    assert spider_patterns(cluster) == ["{distributed}:*", "{distributed/[0-9]*}:*"]
    # A seed list outside the prefix (a spider's redis_key) is named too.
    assert spider_patterns(RedisKeys("s", "seeds")) == ["s:*", "seeds", "seeds:rejected"]
    # The db_writer: the item buffer and its lock, and the seeds its revisits
    # go to; not the frontier.
    assert spider_patterns(RedisKeys("s"), DB_WRITER.suffixes) == [
        "s:items",
        "s:items:*",
        "s:db_writer:*",
        "s:start_urls",
    ]
    # On a cluster, the item buffers of the frontier shards too, beside which it
    # keeps the same: every key of a shard's buffer, no other key of a shard.
    on_cluster = spider_patterns(
        RedisKeys("s", cluster=True), DB_WRITER.suffixes, DB_WRITER.shard_suffixes
    )
    assert on_cluster == [
        "{s}:items",
        "{s}:items:*",
        "{s}:db_writer:*",
        "{s}:start_urls",
        "{s/[0-9]*}:items",
        "{s/[0-9]*}:items:*",
        "{s/[0-9]*}:db_writer:*",
    ]
    sharded = RedisKeys("s", cluster=True, shards=3)
    for buffer in item_buffers(sharded):
        names = [buffer.items, buffer.items_rejected, buffer.db_writer_stats]
        names += [processing_of(buffer, "w"), writers(buffer), lease(buffer, "w")]
        names += [filling(buffer), buffer.items_processing, buffer.db_writer_lock]
        for name in names:
            assert any(_matches(p, name) for p in on_cluster), name
    for shard in sharded.all_shards:
        for name in (shard.hosts, shard.seen, shard.requests_size, shard.leases):
            assert not any(_matches(p, name) for p in on_cluster), name


def _matches(pattern: str, key: str) -> bool:
    """Redis' glob on one key, for patterns without escapes (fnmatch's ``*`` is Redis')."""
    return fnmatch.fnmatchcase(key, pattern)


def test_the_cookie_jars_are_the_workers_and_the_operators_never_the_monitors():
    keys = RedisKeys("quotes")
    assert cookie_patterns(keys) == ["cookies:quotes:*"]
    cluster = RedisKeys("quotes", cluster=True)
    assert cookie_patterns(cluster) == ["cookies:{quotes}:*"]
    assert cookie_patterns(RedisKeys("a*b")) == ["cookies:a\\*b:*"]
    for k in (keys, cluster):
        (pattern,) = cookie_patterns(k)
        assert _matches(pattern, cookie_jar(k, "default"))
        assert not _matches(pattern, cookie_jar(RedisKeys("other", cluster=k.cluster), "default"))
        # The jar is outside the spider's own patterns: what the monitor is given.
        assert not any(_matches(p, cookie_jar(k, "default")) for p in spider_patterns(k))
        # The index and the counts are inside: the monitor reads those.
        assert any(_matches(p, cookie_counts(k)) for p in spider_patterns(k))
    for role in (WORKER, OPERATOR):
        assert "%RW~cookies:quotes:* " in user_line(role, "x", [keys], cluster=False) + " "
        assert "%RW~cookies:{quotes}:*" in user_line(role, "x", [cluster], cluster=True)
    for role in (MONITOR, DB_WRITER):
        assert "cookies:" not in user_line(role, "x", [keys], cluster=False), role.name
        assert "cookies:" not in user_line(role, "x", [cluster], cluster=True), role.name
    # The start check asks for a jar: a file made before the jars existed is refused.
    jar = cookie_jar(keys, "default")
    assert ("HGETALL", jar) in probes(WORKER, keys, cluster=False)
    assert ("UNLINK", jar) in probes(OPERATOR, keys, cluster=False)
    assert all(jar not in probe for probe in probes(MONITOR, keys, cluster=False))


def test_a_user_line_holds_the_passwords_hash_never_the_password():
    line = user_line(WORKER, "s3cret", [RedisKeys("a"), RedisKeys("b")], cluster=False)
    digest = hashlib.sha256(b"s3cret").hexdigest()
    assert line.startswith(f"user crawler-worker reset on #{digest} -@all ")
    assert "s3cret" not in line
    assert "%RW~a:* %RW~cookies:a:* %RW~b:* %RW~cookies:b:*" in line
    assert line.endswith("(%W~spiders +sadd)")
    assert "+cluster|slots" not in line
    assert "+cluster|slots" in user_line(WORKER, "x", [RedisKeys("a", cluster=True)], True)
    # The db_writer reads (and may record) the shard count on a cluster only.
    cluster_writer = user_line(DB_WRITER, "x", [RedisKeys("a", cluster=True)], True)
    assert "%RW~{a}:frontier:shards" in cluster_writer and "+asking" in cluster_writer
    assert "frontier" not in user_line(DB_WRITER, "x", [RedisKeys("a")], cluster=False)
    with pytest.raises(ValueError, match="REDIS_ACL_WORKER_PASSWORD"):
        user_line(WORKER, "", [RedisKeys("a")], cluster=False)


def test_the_file_has_the_default_user_off_and_no_comment():
    config = AclConfig({role.name: f"p-{role.name}" for role in ROLES}, cluster=False)
    lines = acl_file(config, [RedisKeys("distributed")]).splitlines()
    assert lines[0] == "user default off"
    assert [line.split()[1] for line in lines[1:]] == [role.user for role in ROLES]
    # Redis refuses to start on any line that is not a user line.
    assert all(line.startswith("user ") for line in lines)


def _settings(**passwords: str) -> Settings:
    settings = load_settings()
    for role in ROLES:
        settings.set(role.password_setting, passwords.get(role.name, "pw"), priority="cmdline")
    return settings


def test_a_missing_password_is_refused_and_a_bad_one_never_echoed():
    assert AclConfig.from_settings(_settings()).passwords["monitor"] == "pw"
    with pytest.raises(ConfigError, match="REDIS_ACL_MONITOR_PASSWORD=''.*needs a password"):
        AclConfig.from_settings(_settings(monitor=""))
    with pytest.raises(ConfigError, match="white space") as caught:
        AclConfig.from_settings(_settings(operator="two words"))
    assert "two words" not in str(caught.value)


def test_deploy_shows_the_file_for_the_bundled_spider_with_placeholder_passwords():
    placeholders = {
        "worker": "CHANGE-ME-worker",
        "db_writer": "CHANGE-ME-db-writer",
        "monitor": "CHANGE-ME-monitor",
        "operator": "CHANGE-ME-operator",
        "replica": "CHANGE-ME-replica",
        "sentinel": "CHANGE-ME-sentinel",
    }
    shown = (PACKAGE.parent / "deploy" / "redis" / "users.acl").read_text()
    assert shown == acl_file(AclConfig(placeholders, cluster=False), [RedisKeys("distributed")])


def test_the_replicas_and_sentinels_users_are_there_only_when_their_password_is():
    config = AclConfig.from_settings(_settings())
    assert set(config.passwords) == {role.name for role in ROLES}
    assert "crawler-replica" not in acl_file(config, [RedisKeys("s")])
    settings = _settings()
    for role in SERVER_ROLES:
        settings.set(role.password_setting, f"p-{role.name}", priority="cmdline")
    lines = acl_file(AclConfig.from_settings(settings), [RedisKeys("s", cluster=True)])
    *_, replica, sentinel = lines.splitlines()
    # No key, no cluster command: replication and Sentinel's own commands only.
    assert replica.endswith("-@all +psync +replconf +ping")
    assert sentinel.split()[1] == SENTINEL.user and sentinel.endswith(" &__sentinel__:hello")
    for line in (replica, sentinel):
        assert "~" not in line and "cluster" not in line
    assert not set(REPLICA.commands) & set(FORBIDDEN)
    assert {"flushall", "flushdb", "debug", "shutdown", "acl", "keys", "monitor"}.isdisjoint(
        SENTINEL.commands
    )
