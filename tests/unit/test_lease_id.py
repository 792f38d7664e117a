"""Lease ids (frontier/lease_id.py): the one place that builds and parses them."""

from __future__ import annotations

import pytest

from spiders_project.frontier.lease_id import NO_SHARD, Lease, LeaseId, build, parse, prefix
from spiders_project.keys import HTTP, RENDER


@pytest.mark.parametrize("shard", [NO_SHARD, 0, 2, 17])
@pytest.mark.parametrize("lane", [HTTP, RENDER])
def test_an_id_built_parses_back_to_what_built_it(shard: int, lane: str) -> None:
    lease_id = build("vm:12:ab12cd", shard, lane, 41)
    assert lease_id == f"{prefix('vm:12:ab12cd', shard, lane)}/41"
    assert parse(lease_id) == parse(lease_id.encode()) == LeaseId("vm:12:ab12cd", shard, lane, 41)


def test_the_prefix_names_the_shard_and_a_lane_other_than_http() -> None:
    assert prefix("vm:12:ab", NO_SHARD, HTTP) == "vm:12:ab"
    assert prefix("vm:12:ab", 2, HTTP) == "vm:12:ab@2"
    assert prefix("vm:12:ab", NO_SHARD, RENDER) == "vm:12:ab+render"
    assert prefix("vm:12:ab", 2, RENDER) == "vm:12:ab@2+render"


def test_what_is_not_a_shard_or_a_lane_stays_in_the_owner() -> None:
    assert parse(b"host@name:1:ab/3") == LeaseId("host@name:1:ab", NO_SHARD, HTTP, 3)
    assert parse("vm:12:ab+other/4") == LeaseId("vm:12:ab+other", NO_SHARD, HTTP, 4)
    assert parse("w/a.example/1") == LeaseId("w/a.example", NO_SHARD, HTTP, 1)


@pytest.mark.parametrize("text", ["vm:12:ab", "vm:12:ab/", "vm:12:ab/x1", b"w@1+render"])
def test_what_is_not_a_lease_id_is_refused(text: str | bytes) -> None:
    with pytest.raises(ValueError, match="not a lease id"):
        parse(text)


def test_a_lease_carries_what_its_id_says() -> None:
    lease = Lease.of(b"vm:12:ab@2+render/7", b'{"url": "http://a/"}', "a")
    assert (lease.owner, lease.shard, lease.lane) == ("vm:12:ab", 2, RENDER)
    assert (lease.id, lease.request, lease.host) == (
        b"vm:12:ab@2+render/7",
        b'{"url": "http://a/"}',
        "a",
    )
    assert Lease.of(b"vm:12:ab/7", b"", "a").shard == NO_SHARD
