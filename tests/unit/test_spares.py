"""Spares (frontier/spares.py): which spares to ask for, and when a slot may go to one."""

from scrapy import Request

from spiders_project.frontier.lease_id import Lease
from spiders_project.frontier.spares import Spares


def leased(host: str, n: int) -> tuple[Request, Lease]:
    return Request(f"http://{host}/{n}"), Lease.of(f"w/{n}".encode(), b"{}", host)


def lease_of(spare):
    return spare[1] if spare is not None else None


def no_delay(host: str) -> int:
    return 0


def test_spares_are_asked_for_the_hosts_leased_from_last_without_delay():
    spares = Spares(depth=10, cap=4)
    assert spares.wanted(no_delay) == []
    spares.took_slot("a")
    spares.took_slot("b")
    assert spares.wanted(no_delay) == []  # below their cap: no spares
    spares.capped("a")
    spares.capped("b")
    # Newest first; at most two caps' worth per host, depth in all.
    assert spares.wanted(no_delay) == [("b", 0, 8, True), ("a", 0, 2, True)]
    assert spares.wanted(lambda host: 500 if host == "b" else 0) == [("a", 0, 8, True)]
    spares.slot_ended("b")
    assert spares.wanted(no_delay)[0] == ("b", 0, 8, False)  # with the call's own slots only


def test_a_spare_takes_a_slot_only_within_the_workers_share():
    spares = Spares(depth=8, cap=4)
    for _ in range(3):
        spares.took_slot("a")
    assert spares.add(*leased("a", 1)) and spares.add(*leased("a", 2))
    assert lease_of(spares.successor("a")) == lease_of(leased("a", 1))
    # Another worker waits: our share is 2 of 4, and we hold 3.
    spares.contested("a", 1)
    assert spares.successor("a") is None
    assert spares.slot_ended("a") == []
    spares.slot_ended("a")
    assert lease_of(spares.successor("a")) == lease_of(leased("a", 2))


def test_spares_of_a_host_whose_last_slot_ended_go_back():
    spares = Spares(depth=8, cap=4)
    assert not spares.add(*leased("a", 1))  # no slot of ours: back at once
    spares.took_slot("a")
    assert spares.add(*leased("a", 2))
    assert len(spares) == 1
    assert [lease for _, lease in spares.slot_ended("a")] == [leased("a", 2)[1]]
    spares.capped("a")
    assert len(spares) == 0 and spares.wanted(no_delay) == [("a", 0, 8, False)]


def test_a_parked_slot_is_known_until_settled():
    spares = Spares(depth=2, cap=4)
    spares.took_slot("a")
    lease = leased("a", 1)[1]
    assert spares.may_park("a")
    spares.park(lease)
    assert spares.is_parked(lease) and spares.parked() == [lease]
    assert spares.unpark(lease) and not spares.unpark(lease)
    assert not Spares(depth=0, cap=4).may_park("a")  # FRONTIER_SPARES=0: never


def test_take_all_empties_the_spares():
    spares = Spares(depth=4, cap=4)
    spares.took_slot("a")
    spares.add(*leased("a", 1))
    assert [lease for _, lease in spares.take_all()] == [leased("a", 1)[1]]
    assert len(spares) == 0
