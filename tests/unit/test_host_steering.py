"""The host steering records (host_steering.py), a worker's copy of them and the block step."""

from __future__ import annotations

import pytest
from scrapy import Request
from scrapy.statscollectors import MemoryStatsCollector
from scrapy.utils.test import get_crawler

from spiders_project.frontier.steps import Enqueue
from spiders_project.keys import RedisKeys, key_slot
from spiders_project.politeness.delays import HostPoliteness
from spiders_project.politeness.steered import SteeredHosts, steer_call
from spiders_project.politeness.steps import BLOCKED_DROPPED, BLOCKED_REFUSED, BlockedHostStep
from spiders_project.read_model.host_steering import (
    HostSteer,
    InvalidSteering,
    check_cap,
    check_delay,
    check_host,
    parse_steering,
)


def test_a_record_round_trips_and_gives_the_lease_scripts_limits():
    steer = HostSteer(delay=1.5, cap=2, blocked=True)
    assert HostSteer.from_json(steer.to_json()) == steer
    assert steer.limits() == "1500 2"
    assert HostSteer(cap=3).limits() == "-1 3" and HostSteer(delay=0).limits() == "0 0"
    assert HostSteer(blocked=True).limits() == ""


@pytest.mark.parametrize(
    "raw",
    [
        b"\x80\x04K\x01.",  # a pickle
        b"[1]",
        b'{"delay": 1, "evil": 2}',
        b'{"delay": -1}',
        b'{"delay": "1"}',
        b'{"cap": 0}',
        b'{"cap": 1.5}',
        b'{"cap": true}',
        b'{"blocked": "yes"}',
    ],
)
def test_a_record_that_is_not_ours_is_refused(raw):
    with pytest.raises(InvalidSteering):
        HostSteer.from_json(raw)


def test_hosts_delays_and_caps_are_checked():
    assert check_host("shop.example:8080") == "shop.example:8080"
    assert check_host("[::1]:8080") == "[::1]:8080"
    for bad in ("", "a b", "a/b", "http://a", "a..b", "-a.example", "A.example"):
        with pytest.raises(InvalidSteering):
            check_host(bad)
    with pytest.raises(InvalidSteering):
        check_delay(-0.1)
    with pytest.raises(InvalidSteering):
        check_delay(float("nan"))
    with pytest.raises(InvalidSteering):
        check_cap(0)


def test_a_workers_copy_serves_delays_and_blocks_and_skips_bad_records():
    steered = SteeredHosts(None, 1.0)
    steered.update(
        {
            b"slow.example": HostSteer(delay=2.0).to_json().encode(),
            b"spam.example": HostSteer(blocked=True).to_json().encode(),
            b"odd.example": b"not json",
        }
    )
    assert steered.delay_ms("slow.example") == 2000 and steered.delay_ms("spam.example") is None
    assert steered.blocked == {"spam.example"}
    assert parse_steering({b"odd.example": b"{}"})[0] == {"odd.example": HostSteer()}
    politeness = HostPoliteness(0.5, {}, 0.03, steered=steered)
    assert politeness.delay_ms("slow.example") == 2000
    assert politeness.delay_ms("other.example") == 500
    assert politeness.gate_ms("slow.example") == 2030
    steered.update({})
    assert politeness.delay_ms("slow.example") == 500 and not steered.blocked


def test_the_block_step_refuses_links_and_drops_leased_requests_of_blocked_hosts():
    steered = SteeredHosts(None, 1.0)
    stats = MemoryStatsCollector(get_crawler())
    step = BlockedHostStep(steered, HostPoliteness(0, {}, 0), stats)
    spam, shop = Request("http://spam.example/a"), Request("http://shop.example/")
    assert step.admit(spam, Enqueue()) is spam
    steered.update({b"spam.example": HostSteer(blocked=True).to_json()})
    assert step.admit(spam, Enqueue()) is None and step.admit(shop, Enqueue()) is shop
    assert step.leased(spam) is None and step.leased(shop) is shop
    assert stats.get_value(BLOCKED_REFUSED) == 1 and stats.get_value(BLOCKED_DROPPED) == 1


def test_the_steer_call_of_a_sharded_frontier_touches_the_hosts_shard_only():
    keys = RedisKeys("distributed", cluster=True, shards=3)
    script_keys, _ = steer_call(keys, "shop.example", "", purge=True)
    assert len({key_slot(k) for k in script_keys}) == 1
    assert key_slot(script_keys[0]) == key_slot(keys.for_host("shop.example").hosts)
