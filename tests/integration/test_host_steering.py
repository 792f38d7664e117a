"""Steering hosts at runtime against a real redis-server: the lease script's
overrides, the purge script, and ``scrapy frontier host`` as an operator runs it.

The scripts run at a time the test sets (``now``), as in test_frontier_scripts.
"""

from __future__ import annotations

import json

from spiders_project.frontier.calls import enqueue_call, lease_call
from spiders_project.keys import RedisKeys
from spiders_project.politeness.steered import (
    KEEP_LIMITS,
    record_call,
    record_script,
    steer_call,
    steer_script,
)
from spiders_project.read_model.host_steering import HostSteer
from tests.integration.test_frontier_scripts import K, Scripts, lease, tok
from tests.support.acl_users import AclRedis, acl_text
from tests.support.processes import K as DK
from tests.support.processes import scrapy_command
from tests.support.services import RedisClusterGroup
from tests.support.shards import one_host_per_shard


def fill(s: Scripts, host: str, n: int, *, wait_ms: int = 0, start: int = 0, keys=K) -> None:
    entries = [
        (host, tok(f"{host}{i}"), 0, f"{host}-{i}".encode(), b"", wait_ms)
        for i in range(start, start + n)
    ]
    keys, args = enqueue_call(keys, entries, now=s.now)
    added, *rejected = s.enqueue(keys, args)
    assert added == n and rejected == []


def steer(s: Scripts, host: str, limits: str, *, purge: bool = False) -> list[int]:
    keys, args = steer_call(K, host, limits, purge=purge)
    return list(s.calls.script(steer_script(), keys, args))


def test_a_cap_override_bounds_the_hosts_leases_and_clearing_it_restores_the_cap(r):
    s = Scripts(r)
    fill(s, "a", 10)
    assert steer(s, "a", HostSteer(cap=2).limits()) == [0, 0]
    members, hosts, *_ = lease(s, 10, [("a", 0)], per_host=8)
    assert len(members) == 2 and hosts == ["a", "a"]
    # At its overridden cap: nothing more, though ARGV's cap is 8.
    assert lease(s, 10, [("a", 0)], per_host=8)[0] == []
    steer(s, "a", "")
    r.zadd(K.hosts, {"a": s.now})  # back in the ready-set, as a freed slot puts it
    assert len(lease(s, 10, [("a", 0)], per_host=8)[0]) == 6


def test_a_delay_override_spaces_turns_even_for_a_caller_that_sends_no_delay(r):
    s = Scripts(r)
    fill(s, "a", 5)
    steer(s, "a", HostSteer(delay=0.5).limits())
    assert len(lease(s, 10, [("a", 0)])[0]) == 1  # one a turn
    assert r.zscore(K.hosts, "a") == s.now + 500
    s.tick(499)
    assert lease(s, 10, [("a", 0)])[0] == []
    s.tick(1)
    assert len(lease(s, 10, [("a", 0)])[0]) == 1
    # The site's own Crawl-delay still wins when larger.
    r.hset(K.host_delays, "a", 2000)
    s.tick(500)
    lease(s, 10, [("a", 0)])
    assert r.zscore(K.hosts, "a") == s.now + 2000


def test_purge_drops_queued_requests_and_waiting_retries_of_one_host_only(r):
    s = Scripts(r)
    fill(s, "a", 4)
    fill(s, "a", 2, wait_ms=60_000, start=10)
    fill(s, "b", 3)
    assert int(r.get(K.requests_size)) == 9
    assert steer(s, "a", KEEP_LIMITS, purge=True) == [4, 2]
    assert int(r.get(K.requests_size)) == 3
    assert r.zscore(K.hosts, "a") is None and r.zscore(K.hosts, "b") is not None
    assert not r.exists(K.host_queue("a"), K.host_list("a"), K.host_later("a"))
    assert steer(s, "a", KEEP_LIMITS, purge=True) == [0, 0]
    assert len(lease(s, 10, [("b", 0)])[0]) == 3


def host(redis_url, *argv):
    return scrapy_command(redis_url, "frontier", "host", *argv)


def test_the_command_sets_shows_and_clears_overrides(redis_url, r):
    done = host(redis_url, "Shop.Example:443", "--delay", "2", "--cap", "3", "--json")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["host"] == "shop.example" and out["changed"] is True
    assert out["delay"]["override"] == 2.0 and out["delay"]["effective"] == 2.0
    assert out["cap"] == {"configured": out["cap"]["configured"], "override": 3, "effective": 3}
    assert HostSteer.from_json(r.hget(DK.host_steering, "shop.example")) == HostSteer(2.0, 3)
    assert r.hget(DK.host_limits, "shop.example") == b"2000 3"
    shown = host(redis_url, "shop.example")  # --show is the default
    assert shown.returncode == 0, shown.stderr
    assert "override 2 s" in shown.stdout and "override 3" in shown.stdout
    # What the cluster knows of the host: the site's delay, robots.txt, bans.
    r.hset(DK.host_delays, "shop.example", 3000)
    r.set(DK.robots("https://shop.example"), "User-agent: *\nDisallow: /cart", px=60_000)
    r.zadd(DK.proxies_banned, {"http://p1:3128": 2**50})
    out = json.loads(host(redis_url, "shop.example", "--show", "--json").stdout)
    assert out["delay"]["site"] == 3.0 and out["delay"]["effective"] == 3.0
    assert out["robots"]["https://shop.example"].startswith("fetched (")
    assert out["robots"]["http://shop.example"].startswith("not fetched")
    assert list(out["proxy_bans"]) == ["http://p1:3128"]
    assert host(redis_url, "shop.example", "--delay", "default").returncode == 0
    assert r.hget(DK.host_limits, "shop.example") == b"-1 3"
    assert host(redis_url, "shop.example", "--clear").returncode == 0
    assert not r.hexists(DK.host_steering, "shop.example")
    assert not r.hexists(DK.host_limits, "shop.example")


def test_block_purges_with_its_count_and_unblock_keeps_the_rest(redis_url, r):
    s = Scripts(r)
    fill(s, "spam.example", 5, keys=DK)
    fill(s, "spam.example", 1, wait_ms=60_000, start=9, keys=DK)
    done = host(redis_url, "spam.example", "--block", "--json")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["purged"] == 6 and out["purged_retries"] == 1 and out["blocked"] is True
    assert out["queued"] == 0 and int(r.get(DK.requests_size)) == 0
    unblocked = json.loads(host(redis_url, "spam.example", "--unblock", "--json").stdout)
    assert unblocked["blocked"] is False and "purged" not in unblocked
    assert not r.hexists(DK.host_steering, "spam.example")
    fill(s, "spam.example", 2, start=20, keys=DK)
    purged = host(redis_url, "spam.example", "--purge")
    assert purged.returncode == 0 and "purged      2 requests" in purged.stdout


def test_bad_input_is_one_line_and_exit_status_2(redis_url, r):
    for argv, word in [
        (("bad host/x", "--block"), "not a host name"),
        (("a.example", "--delay", "-1"), "--delay"),
        (("a.example", "--delay", "soon"), "--delay"),
        (("a.example", "--cap", "0"), "--cap"),
        (("a.example", "--block", "--unblock"), "--unblock"),
    ]:
        done = host(redis_url, *argv)
        assert done.returncode == 2, (argv, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("ERROR:") and word in lines[0], lines
    assert r.hlen(DK.host_steering) == 0


def test_crawlstatus_shows_steered_hosts(redis_url, r):
    host(redis_url, "slow.example", "--delay", "1.5")
    host(redis_url, "spam.example", "--block")
    done = scrapy_command(redis_url, "crawlstatus", "--once")
    assert done.returncode == 0, done.stderr
    assert "hosts       2 steered, 1 blocked" in done.stdout
    lines = done.stdout.splitlines()
    assert any("spam.example" in line and "BLOCKED" in line for line in lines), done.stdout
    assert any("slow.example" in line and "delay 1.5 s" in line for line in lines), done.stdout
    as_json = json.loads(scrapy_command(redis_url, "crawlstatus", "--once", "--json").stdout)
    assert as_json["spiders"][0]["hosts"]["blocked"] == 1


def test_the_operator_steers_and_the_monitor_reads_as_their_own_users(tmp_path):
    server = AclRedis(tmp_path / "acl", acl_text("distributed"))
    try:
        operator = server.url("operator")
        for argv in (("--delay", "2", "--cap", "1"), ("--block",), ("--show",), ("--purge",)):
            done = host(operator, "a.example", *argv)
            assert done.returncode == 0, (argv, done.stderr)
        host(operator, "a.example", "--unblock")
        # crawlstatus runs as the monitor's user (what the exporter reads).
        status = scrapy_command(server.url("monitor"), "crawlstatus", "--once", "--json")
        assert status.returncode == 0, status.stderr
        assert json.loads(status.stdout)["spiders"][0]["hosts"]["steered"] == {
            "a.example": {"delay": 2.0, "cap": 1, "blocked": False}
        }
        worker = server.client("worker")
        assert worker.hgetall(DK.host_steering) and worker.hget(DK.host_limits, "a.example")
        worker.close()
        assert server.denials() == []
    finally:
        server.close()


def test_on_a_redis_cluster_each_host_is_steered_in_its_own_shard():
    """Three masters, one frontier shard each: a host's purge and limits are in its shard."""
    group = RedisClusterGroup(masters=3)
    try:
        ck = RedisKeys("distributed", cluster=True, shards=3)
        client = group.client
        client.set(ck.frontier_shards, 3)
        hosts = one_host_per_shard(ck, 3)
        s = Scripts(client)
        for h in hosts:
            entries = [(h, tok(f"{h}{i}"), 0, f"{h}-{i}".encode()) for i in range(3)]
            keys, args = enqueue_call(ck.for_host(h), entries, now=s.now)
            assert s.enqueue(keys, args)[0] == 3
        env = {"REDIS_CLUSTER": "true"}

        def run(*argv: str) -> dict:
            done = scrapy_command(group.url, "frontier", "host", *argv, "--json", env=env)
            assert done.returncode == 0, done.stderr
            return json.loads(done.stdout)

        assert run(hosts[0], "--block")["purged"] == 3
        assert run(hosts[1], "--cap", "1")["queued"] == 3
        assert client.hget(ck.for_host(hosts[1]).host_limits, hosts[1]) == b"-1 1"
        shown = run(hosts[2])
        assert shown["queued"] == 3 and shown["blocked"] is False
        for h, left in zip(hosts, (0, 3, 3), strict=True):
            shard = ck.for_host(h)
            assert client.zcard(shard.host_queue(h)) + client.llen(shard.host_list(h)) == left
        # The lease script of the capped host's shard reads its cap there.
        keys, args = lease_call(
            ck.for_host(hosts[1]), 8, 60_000, [(hosts[1], 0)], 8, 8, "w1", 0, now=s.now
        )
        assert len(s.lease(keys, args)[0]) == 3  # one lease: (id, request, host)
        status = scrapy_command(group.url, "crawlstatus", "--once", "--json", env=env)
        assert status.returncode == 0, status.stderr
        assert json.loads(status.stdout)["spiders"][0]["hosts"]["blocked"] == 1
    finally:
        group.stop()


def test_the_record_changes_field_by_field_so_two_operators_keep_both_changes(r):
    calls = Scripts(r).calls

    def change(delay="", cap="", blocked=None):
        keys, args = record_call(K, "a.example", delay, cap, blocked)
        before, after = calls.script(record_script(), keys, args)
        return before, after

    change(delay="1.5")
    change(cap="2")  # another operator: the delay stays
    change(blocked=True)
    assert HostSteer.from_json(r.hget(K.host_steering, "a.example")) == HostSteer(1.5, 2, True)
    before, after = change(delay="default", blocked=False)
    assert HostSteer.from_json(before) == HostSteer(1.5, 2, True)
    assert HostSteer.from_json(after) == HostSteer(None, 2, False)
    assert change(cap="default")[1] == b"" and not r.hexists(K.host_steering, "a.example")
    # A record that is not ours (or a field of the wrong type) counts as not set.
    r.hset(K.host_steering, "a.example", b'{"delay": "x", "cap": 3, "evil": 1}')
    assert HostSteer.from_json(change(blocked=True)[1]) == HostSteer(None, 3, True)
    r.hset(K.host_steering, "a.example", b"\x80\x04K\x01.")
    assert HostSteer.from_json(change(delay="0.25")[1]) == HostSteer(0.25)
