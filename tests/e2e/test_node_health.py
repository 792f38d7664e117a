"""A worker whose own network is broken takes itself out, loses nothing, and comes back.

One of two workers runs with a group id of its own, and an iptables rule
refuses (with a reset, as a dead route or a firewall does) every connection
of that group to the site, while Redis stays reachable: the node that FINDINGS
measured failing 834 fetches in 90 s. The other worker crawls. The site's own
request log is the witness that nothing is fetched twice; the dead list, that
no URL was given up.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from tests.support.processes import (
    K,
    db_writer,
    items_drained,
    published_stats,
    stat,
    stored_urls,
    wait_until,
    worker,
)
from tests.support.site import TestSite

pytestmark = pytest.mark.slow

SETTINGS = (
    "MAX_IDLE_TIME_BEFORE_CLOSE=3",
    "CONCURRENT_REQUESTS=4",
    "STATS_PUBLISH_INTERVAL=1",
    "STATS_HEARTBEAT_TTL=3",
    "NODE_PROBE_INTERVAL=1",
)


@contextmanager
def refused_to_group(port: int, gid: int) -> Iterator[list[str]]:
    """Connections of group ``gid`` to 127.0.0.1:``port`` refused with a reset, until healed.

    Yields the rule, so the test can delete it early (the heal); removed at the end anyway.
    """
    rule = ["OUTPUT", "-p", "tcp", "-d", "127.0.0.1", "--dport", str(port)]
    rule += ["-m", "owner", "--gid-owner", str(gid), "-j", "REJECT", "--reject-with", "tcp-reset"]
    subprocess.run(["iptables", "-I", *rule], check=True)
    try:
        yield rule
    finally:
        subprocess.run(["iptables", "-D", *rule], check=False, capture_output=True)


def test_a_node_that_reaches_no_site_hands_back_and_resumes_once_healed(
    redis_url, r, tmp_path, procs
):
    gid = 40_000 + os.getpid() % 20_000  # one per pytest process
    db_path = tmp_path / "items.db"
    with TestSite(pages=400, seed=5, latency=0.1) as site:
        port = int(site.url.rsplit(":", 1)[1].rstrip("/"))
        with refused_to_group(port, gid) as rule:
            # Group id ``gid``: the one the rule refuses.
            in_group = ("setpriv", "--regid", str(gid), "--clear-groups")
            sick = worker("sick", redis_url, tmp_path, *SETTINGS, prefix=in_group)
            healthy = worker("healthy", redis_url, tmp_path, *SETTINGS)
            writer = db_writer("dbw", redis_url, f"sqlite:///{db_path}", tmp_path)
            procs += [sick, healthy, writer]
            r.lpush(K.start_urls, site.url)
            wait_until(
                lambda: published_stats(r, sick).get("node/cut_off") == "1",
                30,
                what="the sick worker to find itself cut off",
            )
            assert stat(r, healthy, "item_scraped_count") > 0
            # Healed while the crawl goes on: its probe finds the site again.
            subprocess.run(["iptables", "-D", *rule], check=True)
        wait_until(lambda: stat(r, sick, "node/recoveries") >= 1, 30, what="the recovery")
        for w in (sick, healthy):
            assert w.wait(120) == 0, w.log()[-3000:]
        wait_until(lambda: items_drained(r), 60, what="the item buffer to drain")
        assert writer.stop(30) == 0, writer.log()[-3000:]

        urls = stored_urls(db_path)
        assert len(urls) == len(set(urls))
        assert set(urls) == site.page_urls()
        assert {u: n for u, n in site.hits().items() if n != 1} == {}

    # No URL was given up for this node's failures.
    assert r.llen(K.dead) == 0
    assert stat(r, sick, "dead_letters/count") == stat(r, healthy, "dead_letters/count") == 0
    # It noticed within NODE_FAILURES failed fetches, was out, and came back to work.
    assert stat(r, sick, "node/cut_offs") == 1
    assert 0 < stat(r, sick, "node/failed_before_cut_off") <= 50
    assert stat(r, sick, "node/cut_off") == 0
    assert stat(r, sick, "item_scraped_count") > 0
    log = sick.log()
    assert log.count("cannot reach the sites the cluster reaches") == 1
    assert log.count("again: fetching again") == 1
    for w in (sick, healthy):
        assert "Traceback" not in w.log()
