"""The batched ack script ends in the same state as the command-by-command one.

``frontier/lua/ack.lua`` reads the state of every lease and host it names
first, runs the releases, transfers and ends on copies, and writes each key
once (issue 29: 8 commands a lease before). The previous version, which ran
each step as Redis commands, is kept in ``lua_reference/ack_stepwise.lua``.
Both run here on the same random states (leases held, released, gone or of
the previous release; hosts at 0, 1 or more slots, with cap waiters and
hand-overs) and the same random calls (a lease named twice, a spare whose
slot passes on in the same call, transfers to gone spares), each in its own
database of one private redis-server; every key of the two databases must
then be equal, and so must the replies.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import redis

from spiders_project.frontier.calls import ack_call
from spiders_project.frontier.scripts import FrontierScripts
from spiders_project.keys import RedisKeys
from spiders_project.redis_access.lua import load_lua, read_lua, without_comments

K = RedisKeys("t")
T0 = 1_700_000_000_000
REFERENCE = Path(__file__).parent / "lua_reference" / "ack_stepwise.lua"
OWNER = "node-1:123"


def _state(r: redis.Redis, rng: random.Random, keys: list[str]) -> list[str]:
    """A random frontier state; returns the lease ids it made (some names gone)."""
    leases, info, flight, waiters, hosts, handover, released = keys[:7]
    ids = []
    host_names = [f"h{n}.example" for n in range(rng.randint(1, 4))]
    for n in range(rng.randint(1, 30)):
        owner = OWNER if rng.random() < 0.9 else "node-2:9"
        lease = f"{owner}/{n}" if rng.random() < 0.95 else "{old}" + str(n)
        ids.append(lease)
        if rng.random() < 0.15:
            continue  # expired and put back: a name with no lease
        host = rng.choice(host_names)
        r.zadd(leases, {lease: T0 + 60_000})
        if rng.random() < 0.95:
            job = rng.choice(["", ',"m":{"crawl_job":"a"}', ',"m":{"crawl_job":"b"}'])
            request = f'{{"u":"https://{host}/{n}"{job}}}'
            r.hset(info, lease, f"{-n} {len(host)} {host}{request}")
        if rng.random() < 0.3:
            r.sadd(released, lease)
    for host in host_names:
        if rng.random() < 0.8:
            r.hset(flight, host, rng.randint(-1, 3))
        if rng.random() < 0.4:
            r.hset(waiters, host, rng.choice([OWNER, "node-2:9", f"{OWNER} node-3:1"]))
        if rng.random() < 0.2:
            r.hset(handover, host, f"{T0 - 5} node-2:9")
        if rng.random() < 0.5:
            r.zadd(hosts, {host: T0 + rng.randint(-100, 100)})
    ids += [f"{OWNER}/{900 + n}" for n in range(3)]  # never leased
    return ids


def _call(rng: random.Random, ids: list[str]) -> dict:
    """Random releases, transfers, pages and ends over ``ids`` (repeats allowed)."""

    def some(k: int) -> list[str]:
        return [rng.choice(ids) for _ in range(rng.randint(0, k))]

    return {
        "releases": some(6),
        "transfers": [(rng.choice(ids), rng.choice(ids)) for _ in range(rng.randint(0, 6))],
        "pages": [(i, rng.choice([0, 1, 3, -1, -2, -3])) for i in some(10)],
        "lease_ids": some(6),
    }


def _dump(r: redis.Redis) -> dict:
    out = {}
    for key in sorted(r.keys("*")):
        kind = r.type(key)
        if kind == b"hash":
            out[key] = r.hgetall(key)
        elif kind == b"set":
            out[key] = r.smembers(key)
        elif kind == b"zset":
            out[key] = r.zrange(key, 0, -1, withscores=True)
        else:
            out[key] = r.dump(key)
    return out


@pytest.fixture
def two(redis_proc):
    """Two databases of the test's private redis-server, emptied before and after."""
    clients = [redis.Redis(host=redis_proc.host, port=redis_proc.port, db=db) for db in (2, 3)]
    for c in clients:
        c.flushdb()
    yield clients
    for c in clients:
        c.flushdb()
        c.close()


def test_the_batched_ack_ends_as_the_stepwise_one_on_random_states(two):
    batched = FrontierScripts().ack
    stepwise = load_lua(REFERENCE.parent, REFERENCE.stem)
    assert stepwise.source == without_comments(read_lua(REFERENCE))
    rng = random.Random(29)
    changed = 0
    for case in range(400):
        seed = rng.random()
        replies = []
        for client, script in zip(two, (batched, stepwise), strict=True):
            client.flushdb()
            case_rng = random.Random(seed)
            ids = _state(client, case_rng, ack_call(K, [])[0])
            call = _call(case_rng, ids)
            before = _dump(client)
            keys, args = ack_call(K, now=T0 + case, **call)
            replies.append(client.eval(script.source, len(keys), *keys, *args))
        a, b = (_dump(c) for c in two)
        assert replies[0] == replies[1], f"case {case}: replies {replies}"
        assert a == b, f"case {case}: {call}"
        changed += a != before
    assert changed > 300  # most calls did change something
