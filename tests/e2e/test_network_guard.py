"""No crossing from public to private networks, with real workers and two local "networks".

The test treats 127.0.0.2 as public (NETWORK_GUARD_PUBLIC) and 127.0.0.1 as
what it is, loopback: private. ``localhost`` is a name that resolves to it.
"""

from __future__ import annotations

import json
import re

import orjson
import pytest

from spiders_project.keys import RedisKeys
from tests.support.processes import stat, worker
from tests.support.wild import WildSite

pytestmark = pytest.mark.slow

K = RedisKeys("everywhere")
SETTINGS = (
    "SPIDER_MODULES=tests.support.wildspiders",
    'NETWORK_GUARD_PUBLIC=["127.0.0.2/32"]',
    "MAX_IDLE_TIME_BEFORE_CLOSE=2",
)


def only_home(site: WildSite) -> dict[str, list[str]]:
    """The seed's limits: none of the site's own sections, just its home page's links."""
    return {"deny": [f"^{re.escape(site.url)}(cal|loop|flaky|docs|private)/"]}


def stored(r) -> set[str]:
    return {orjson.loads(e)["item"]["url"] for e in r.lrange(K.items, 0, -1)}


def run(redis_url, tmp_path, procs, name, *extra):
    w = worker(name, redis_url, tmp_path, *SETTINGS, *extra, spider="everywhere")
    procs.append(w)
    assert w.wait(120) == 0, w.log()[-3000:]
    return w


def test_public_pages_cannot_reach_private_addresses(redis_url, r, tmp_path, procs):
    with (
        WildSite(docs=2, host="127.0.0.2") as public,
        WildSite(docs=2, host="127.0.0.1", robots=None) as private,
    ):
        secret = f"http://127.0.0.1:{private.port}/docs/1"
        by_name = f"http://localhost:{private.port}/docs/2"
        public.links = [
            secret,  # a link to a private address
            f"/redirect?to={private.url}docs/3",  # a redirect to one
            by_name,  # a name that resolves to one
        ]
        r.lpush(K.start_urls, json.dumps({"url": public.url, **only_home(public)}))
        w = run(redis_url, tmp_path, procs, "w")
        assert private.log() == [], private.log()
        assert public.requested("/redirect") == {f"/redirect?to={private.url}docs/3": 1}
        # The three requests, and the robots.txt each private host would have needed.
        assert stat(r, w, "scope/private_network", keys=K) == 3 + 2
        log = w.log()
        assert log.count("Refused ") == 2  # once per host: 127.0.0.1 and localhost
        # The name was refused on the address the connection would have used.
        assert "localhost is 127.0.0.1 (resolved), not public" in log
        assert r.llen(K.dead) == 0
        assert stored(r) == {public.url}


def test_a_private_seed_is_the_operators_choice(redis_url, r, tmp_path, procs):
    with (
        WildSite(docs=4, host="127.0.0.1") as private,
        WildSite(docs=2, host="127.0.0.1", robots=None) as other,
    ):
        private.links = [f"{other.url}docs/1"]  # private to private: allowed
        r.lpush(K.start_urls, json.dumps({"url": private.url, "deny": ["/cal/", "/loop/"]}))
        w = run(redis_url, tmp_path, procs, "w")
        assert {f"{private.url}docs/{n}" for n in range(1, 4)} <= stored(r)
        assert f"{other.url}docs/1" in stored(r)
        assert stat(r, w, "scope/private_network", keys=K) == 0


def test_allow_private_networks_turns_the_guard_off(redis_url, r, tmp_path, procs):
    with (
        WildSite(docs=2, host="127.0.0.2") as public,
        WildSite(docs=2, host="127.0.0.1", robots=None) as private,
    ):
        public.links = [f"http://localhost:{private.port}/docs/1"]
        r.lpush(K.start_urls, json.dumps({"url": public.url, **only_home(public)}))
        run(redis_url, tmp_path, procs, "w", "ALLOW_PRIVATE_NETWORKS=true")
        assert f"http://localhost:{private.port}/docs/1" in stored(r)
