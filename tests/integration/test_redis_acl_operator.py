"""The operator's whole job as ``crawler-operator``, on real redis-servers loaded
with the file of ``scrapy redis-acl``: seeding, ``crawlmove`` from one Redis to
another, ``deadletters list``, ``requeue`` and ``purge``, ``dupefilter
migrate``, ``crawlstatus`` and ``cookies list`` and ``clear``, with not one
refusal in either server's ACL LOG;
and ``crawlmove``, like the other commands, refuses at start a user that lacks
what it writes.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from spiders_project.dead_letters.letters import make_dead_letter
from spiders_project.frontier.codec import serialize
from spiders_project.keys.cookies import cookie_jar, cookie_jars
from tests.support.acl_users import AclRedis, acl_text
from tests.support.processes import K, scrapy_command


@pytest.fixture
def two_redis(tmp_path) -> Iterator[tuple[AclRedis, AclRedis]]:
    source = AclRedis(tmp_path / "source", acl_text("distributed"))
    target = AclRedis(tmp_path / "target", acl_text("distributed"))
    yield source, target
    source.close()
    target.close()


def dead_letter(n: int) -> bytes:
    """A dead letter as a worker writes it (dead_letters/letters.py)."""
    payload = serialize.dumps({"url": f"http://a.test/{n}", "meta": {"retry_times": 2}})
    letter = make_dead_letter(
        payload, error="HTTP 503", attempts=3, failed_at=datetime.now(UTC), worker="h:1"
    )
    return letter.dumps()


def test_the_operator_seeds_and_runs_every_command_as_its_own_user(two_redis):
    source, target = two_redis
    # Seeding, and what a crawl leaves behind: dead letters and the previous
    # release's fingerprints (scrapy-redis' hex set), all written as the operator.
    operator = source.client("operator")
    operator.lpush(K.start_urls, "http://a.test/", "http://b.test/")
    operator.lpush(K.dead, *(dead_letter(n) for n in range(3)))
    old_set = [hashlib.sha1(b"old %d" % i).hexdigest() for i in range(5)]
    operator.sadd(K.dupefilter, *old_set)
    operator.close()

    def scrapy(*argv: str) -> str:
        done = scrapy_command(target.url("operator"), *argv)
        assert done.returncode == 0, (argv, done.stdout, done.stderr)
        return done.stdout

    # The source is read as the operator too (DUMP, SCAN, TYPE, PTTL...).
    moved = scrapy("crawlmove", "--from", source.url("operator"))
    assert "Moved the crawl of distributed" in moved, moved
    admin = target.admin
    assert admin.llen(K.start_urls) == 2 and admin.llen(K.dead) == 3
    listed = scrapy("deadletters", "list")
    assert "3 dead letters in distributed:dead" in listed, listed
    assert "Requeued 1 dead letters" in scrapy("deadletters", "requeue", "--limit", "1")
    assert admin.zcard(K.host_queue("a.test")) == 1
    assert "Purged 2 dead letters" in scrapy("deadletters", "purge")
    migrated = scrapy("dupefilter", "migrate")
    assert "Moved 5 fingerprints" in migrated, migrated
    assert not admin.exists(K.dupefilter)
    assert "distributed" in scrapy("crawlstatus", "--once")
    # The shared cookie jars (outside the spider's prefix): listed and cleared.
    admin.hset(cookie_jar(K, "default"), "a.test\t/\tsid", json.dumps({"value": "v"}))
    admin.zadd(cookie_jars(K), {"default": 1})
    assert "Jar 'default': 1 cookies" in scrapy("cookies", "list")
    assert "Cleared 1 cookie jars" in scrapy("cookies", "clear")
    assert not admin.exists(cookie_jar(K, "default"))
    # Seeding the new Redis directly.
    operator = target.client("operator")
    assert operator.lpush(K.start_urls, "http://c.test/") == 3
    operator.close()
    # Not one command or key was refused, scripts' own calls included.
    assert source.denials() == [] and target.denials() == []


def test_crawlmove_checks_the_operators_user_at_start(two_redis):
    source, target = two_redis
    target.admin.execute_command("ACL", "SETUSER", "crawler-operator", "-restore")
    done = scrapy_command(target.url("operator"), "crawlmove", "--from", source.url("operator"))
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert "'crawler-operator' may not run" in done.stderr and "RESTORE" in done.stderr
