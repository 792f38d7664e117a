"""``scrapy crawlmove`` between two single redis-servers: what it refuses, and
what it copies (the cluster case: tests/e2e/test_cluster.py)."""

from __future__ import annotations

import subprocess

import redis

from spiders_project.frontier.calls import enqueue_call
from spiders_project.frontier.scripts import FrontierScripts
from spiders_project.frontier.seen import SeenConfig
from spiders_project.keys import RedisKeys
from spiders_project.keys.jobs import host_jobs
from tests.support.processes import scrapy_command

K = RedisKeys("distributed")
SEEN = SeenConfig("exact", 1, 0.5)


def crawlmove(target_url: str, *argv: str) -> subprocess.CompletedProcess[str]:
    return scrapy_command(target_url, "crawlmove", *argv)


def fill(source: redis.Redis) -> None:
    """A crawl under way, written by the frontier's own script: 3 hosts, a retry waiting,
    a job's requests."""
    entries = [
        (f"h{i % 3}", SEEN.token(bytes([i]) * 20), i % 2, f'{{"u":"http://h{i % 3}/{i}"}}'.encode())
        for i in range(30)
    ]
    entries.append(("h0", "", 0, b'{"u":"http://h0/retry"}', b"", 60_000))
    # A job's requests: in their hosts' jobs sets, the hosts in the turns.
    entries += [
        (
            f"h{i}",
            SEEN.token(bytes([100 + i]) * 20),
            0,
            f'{{"u":"http://h{i}/j","m":{{"crawl_job":"J"}}}}'.encode(),
        )
        for i in range(3)
    ]
    keys, args = enqueue_call(K, entries, seen=SEEN.spec)
    source.eval(FrontierScripts().enqueue.source, len(keys), *keys, *args)
    source.hset(K.host_delays, "h1", 2000)
    source.lpush(K.start_urls, "http://h9/")
    source.rpush(K.dead, b'{"u":"http://h2/dead"}')
    source.set(K.host_turn("h0"), 1, px=60_000)


def contents(client: redis.Redis) -> dict[str, object]:
    """Every key of the spider in ``client``, by name, as comparable values."""
    out: dict[str, object] = {}
    for key in client.scan_iter(match="distributed:*"):
        kind = client.type(key)
        if kind == b"zset":
            out[key.decode()] = client.zrange(key, 0, -1, withscores=True)
        elif kind == b"list":
            out[key.decode()] = client.lrange(key, 0, -1)
        elif kind == b"set":
            out[key.decode()] = sorted(client.smembers(key))
        elif kind == b"hash":
            out[key.decode()] = client.hgetall(key)
        else:
            out[key.decode()] = client.get(key)
    return out


def test_a_crawl_moves_whole_between_two_redis_servers(start_redis):
    _, source_url = start_redis()
    _, target_url = start_redis()
    source = redis.Redis.from_url(source_url)
    target = redis.Redis.from_url(target_url)
    fill(source)
    before = contents(source)

    # A worker still holds a lease: refused, nothing written.
    source.zadd(K.leases, {"w:1:1/0": 1})
    refused = crawlmove(target_url, "--from", source_url)
    assert refused.returncode == 1, refused.stderr
    assert "leased" in refused.stderr and "Traceback" not in refused.stderr
    assert target.dbsize() == 0
    source.delete(K.leases)

    moved = crawlmove(target_url, "--from", source_url)
    assert moved.returncode == 0, moved.stderr
    assert "34 queued requests of 3 hosts into 1 shard(s)" in moved.stdout, moved.stdout
    copied = contents(target)
    assert host_jobs(K, "h2") in before and host_jobs(K, "h2") in copied
    turn = K.host_turn("h0")
    assert copied == {k: v for k, v in before.items() if k != turn}, "not copied as it was"
    assert turn not in copied  # a turn belongs to the source's workers
    assert target.sismember("spiders", "distributed")
    assert contents(source) == before, "the source was changed"

    # The target is now in use: refused, unless told to overwrite.
    again = crawlmove(target_url, "--from", source_url)
    assert again.returncode == 1 and "--overwrite" in again.stderr, again.stderr
    target.lpop(K.start_urls)
    forced = crawlmove(target_url, "--from", source_url, "--overwrite")
    assert forced.returncode == 0, forced.stderr
    assert contents(target) == copied
