"""Distance (issue 26): two workers on two hosts, each 5 ms from Redis, crawl a site once.

Every process runs on a host of its own (tests/support/netns.py): Redis, the
site and two workers. This kernel has no netem, so each worker's host runs a
TCP delay relay (tests/support/relay.py, 5 ms each way: 10 ms of round trip)
in front of Redis, and the worker talks to Redis only through it. The host's
cap (CONCURRENT_REQUESTS_PER_DOMAIN=4 for the cluster) binds all along, so
the two workers keep passing slots to spare leases (frontier/spares.py) and
handing them to each other. The site's own request log, which records which
host asked for what, is the witness: every page requested once, its item
buffered once, nothing dead, nothing left leased. No timing is asserted: the
speed is `make bench`'s (tests/bench/distance.py).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.netns import NetnsBed
from tests.support.processes import K, Proc, stat, wait_until, worker
from tests.support.relay import Relay
from tests.support.services import RedisServer
from tests.support.site import TestSite

pytestmark = pytest.mark.slow

DELAY = 0.005  # seconds each way, between each worker and Redis
CAP = 4  # CONCURRENT_REQUESTS_PER_DOMAIN, for the cluster
SETTINGS = (
    f"CONCURRENT_REQUESTS_PER_DOMAIN={CAP}",
    "STATS_PUBLISH_INTERVAL=1",
    "MAX_IDLE_TIME_BEFORE_CLOSE=3",
)


@pytest.fixture
def bed() -> Iterator[NetnsBed]:
    with NetnsBed(("redis", "site", "w1", "w2")) as made:
        yield made


def test_two_distant_workers_crawl_every_page_once(bed, tmp_path: Path, procs: list[Proc]):
    server = RedisServer(host=bed.address("redis"), prefix=bed.prefix("redis"))
    relays: list[Relay] = []
    with bed.inside("site"):
        # 50 ms a page at a cap of 4: the crawl lasts some 5 s, so both workers
        # take part even when a loaded machine starts one of them late.
        site = TestSite(
            pages=400, seed=26, latency=0.05, host=bed.address("site"), dead_links=False
        )
        site.start()
    try:
        r = server.client
        workers = []
        for host in ("w1", "w2"):
            relay = Relay(
                (bed.address("redis"), server.port),
                DELAY,
                tmp_path,
                host=bed.address(host),
                prefix=bed.prefix(host),
                name=f"relay-{host}",
            )
            relays.append(relay)
            url = f"redis://{relay.address[0]}:{relay.address[1]}/0"
            workers.append(worker(host, url, tmp_path, *SETTINGS, prefix=bed.prefix(host)))
        procs += workers
        wait_until(lambda: r.zcard(K.workers) == 2, 60, what="two workers")
        r.lpush(K.start_urls, site.url)
        for w in workers:
            assert w.wait(120) == 0, w.log()[-3000:]

        # The site's log: every page requested exactly once, by the two hosts.
        hits = site.hits()
        pages = site.page_urls()
        assert {url: hits[url] for url in pages} == dict.fromkeys(pages, 1)
        clients = Counter(site.clients())
        assert clients[bed.address("w1")] > 0 and clients[bed.address("w2")] > 0
        assert set(clients) == {bed.address("w1"), bed.address("w2")}
        # Each page's item buffered once; nothing dead, nothing left leased or counted.
        stored = Counter(json.loads(entry)["url"] for entry in r.lrange(K.items, 0, -1))
        assert stored == Counter(dict.fromkeys(pages, 1))
        assert r.llen(K.dead) == 0
        assert r.zcard(K.leases) == 0 and int(r.get(K.requests_size) or 0) == 0
        assert not r.exists(K.in_flight, K.released, K.lease_info)
        # The slots went through spares at this distance (the path under test).
        assert sum(stat(r, w, "frontier/slots_passed") for w in workers) > 0
        for w in workers:
            assert "Traceback" not in w.log(), w.name
    finally:
        for relay in relays:
            relay.close()
        site.stop()
        server.stop()
