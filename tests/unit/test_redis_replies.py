"""Redis replies read the same whichever way the client parsed them."""

from __future__ import annotations

from spiders_project.read_model.replies import (
    fullest,
    hash_fields,
    info,
    numbers,
    redis_time,
    scored,
    text,
)


def test_raw_and_parsed_replies_read_alike() -> None:
    assert text(b"h:1") == text("h:1") == "h:1"
    assert redis_time([b"1000", b"500000"]) == redis_time((1000, 500000)) == 1000.5
    raw_info = b"# Memory\r\nused_memory:2048\r\nmaxmemory:0\r\n"
    assert info(raw_info) == {"used_memory": "2048", "maxmemory": "0"}
    assert info({"used_memory": 2048}) == {"used_memory": 2048}
    assert hash_fields([b"pages", b"7"]) == {b"pages": b"7"}
    assert hash_fields({b"pages": b"7"}) == {b"pages": b"7"}
    assert scored([b"a", b"1.5", b"b", b"2"]) == [(b"a", 1.5), (b"b", 2.0)]
    assert scored([[b"a", 1.5]]) == [(b"a", 1.5)]
    assert scored([]) == []
    assert numbers({b"items_written": b"6", b"note": b"x"}) == {"items_written": 6.0}


def test_the_fullest_node_is_the_one_nearest_its_limit() -> None:
    nodes = [
        {"used_memory": 900, "maxmemory": 0},  # no limit: ranked after any limited one
        {"used_memory": 50, "maxmemory": 100},
        {"used_memory": "80", "maxmemory": "100"},  # 80% full: the fullest
    ]
    assert fullest(nodes) == {"used_memory": "80", "maxmemory": "100"}
    assert fullest([{"used_memory": 1}, {"used_memory": 5}]) == {"used_memory": 5}
    assert fullest([]) == {}
