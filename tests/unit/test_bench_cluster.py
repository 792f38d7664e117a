"""The cluster phase's arithmetic: per-master CPU split into what follows a shard's pages,
what every master pays whatever its share, and the spider's own keys; the projection."""

from __future__ import annotations

import pytest

from tests.bench.cluster import ClusterResult, Master
from tests.bench.cluster_keys import shape
from tests.bench.cluster_section import section
from tests.bench.crawls import CrawlResult

CRAWL = CrawlResult("cluster", 1, 3000, 250.0, 3.5, 0.02, 0.0, 12.0)


def result(fixed: float, slope: float, own: float, shares: tuple[float, ...]) -> ClusterResult:
    masters = [
        Master(f"shard {i}", fixed + slope * p + (own if i == 0 else 0.0), {"sadd": p}, p)
        for i, p in enumerate(shares)
    ]
    return ClusterResult(CRAWL, masters, 10.0, hosts=6)


def test_uneven_shares_tell_the_fixed_cost_from_the_spiders_own():
    r = result(fixed=4.0, slope=60.0, own=2.0, shares=(1 / 3, 1 / 6, 1 / 2))
    assert r.fixed_us == pytest.approx(4.0)
    assert r.own_us == pytest.approx(2.0)
    assert r.frontier_us == pytest.approx(60.0)
    assert r.capacity(1) == pytest.approx(1e6 / 74.0)  # 3 masters' fixed on one
    assert r.capacity(30) == pytest.approx(1e6 / (72.0 / 30 + 2.0))
    assert r.capacity(1, fixed_stays=True) == pytest.approx(1e6 / 66.0)
    assert r.capacity(30, fixed_stays=True) == pytest.approx(1e6 / (2.0 + 4.0 + 2.0))
    assert r.linearity(1) == r.linearity(1, fixed_stays=True) == pytest.approx(1.0)


def test_with_nothing_but_the_frontier_the_projection_is_linear():
    r = result(fixed=0.0, slope=60.0, own=0.0, shares=(1 / 3, 1 / 6, 1 / 2))
    assert r.linearity(30) == pytest.approx(1.0)
    assert "| 30 | 500,000 | 1.00 | 3e+10 | 500,000 | 1.00 |" in "\n".join(section(r))


def test_a_negative_own_cost_is_noise_and_counts_as_zero():
    r = result(fixed=0.0, slope=60.0, own=-3.0, shares=(1 / 3, 1 / 6, 1 / 2))
    assert r.own_raw_us == pytest.approx(-3.0)
    assert r.own_us == 0.0
    assert "below zero is noise" in "\n".join(section(r))


def test_key_shapes_keep_the_hash_tag_and_hide_ports_and_pids():
    assert shape("{distributed/1.3}:requests:list:127.0.0.1:4242") == (
        "{distributed/1.3}:requests:list:#.#.#.#:#"
    )
    assert shape("{distributed}:worker:vm:1234") == "{distributed}:worker:vm:#"
    assert shape("spiders") == "spiders"
