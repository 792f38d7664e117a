"""The contract between workers and their readers: pure reading, stdlib only."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from spiders_project.contract import (
    Work,
    as_dict,
    counters_of,
    read_cluster,
    work_of,
    work_reads,
)
from spiders_project.keys import RENDER, RedisKeys

ROOT = Path(__file__).resolve().parents[2]


def imports_of(path: Path) -> set[str]:
    """Top-level module names ``path`` imports (``a.b`` for ``from a.b import c``)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_the_contract_imports_only_the_standard_library_and_keys() -> None:
    for name in imports_of(ROOT / "spiders_project" / "contract.py"):
        top = name.split(".")[0]
        assert top in sys.stdlib_module_names or name == "spiders_project.keys", name
    for name in imports_of(ROOT / "spiders_project" / "keys.py"):
        assert name.split(".")[0] in sys.stdlib_module_names, name


def test_spiders_project_never_imports_the_monitor() -> None:
    for path in (ROOT / "spiders_project").rglob("*.py"):
        found = {n for n in imports_of(path) if n == "monitor" or n.startswith("monitor.")}
        assert not found, (path, found)


def test_the_monitor_reads_workers_through_the_contract_not_their_extensions() -> None:
    for path in (ROOT / "monitor").rglob("*.py"):
        worker_side = {
            n
            for n in imports_of(path)
            if n.startswith(("spiders_project.extensions", "spiders_project.frontier"))
        }
        assert not worker_side, (path, worker_side)


@pytest.mark.parametrize(
    ("work", "idle", "drained"),
    [
        (Work(0, 0, 0, 0, 0), True, True),
        (Work(0, 0, 0, 3, 1), True, False),  # the db_writer still drains: workers may close
        (Work(1, 0, 0, 0, 0), False, False),  # a seed nobody claimed yet
        (Work(0, 5, 0, 0, 0), False, False),
        (Work(0, 0, 2, 0, 0), False, False),  # a lease: its links may still come
    ],
)
def test_one_idle_rule(work: Work, idle: bool, drained: bool) -> None:
    assert work.idle is idle and work.drained is drained


def test_work_reads_every_structure_of_unfinished_work() -> None:
    k = RedisKeys("s")
    assert work_reads(k) == [
        ("LLEN", k.start_urls),
        ("GET", k.requests_size),
        ("ZCARD", k.leases),
        ("LLEN", k.items),
        ("LLEN", k.items_processing),
        ("GET", k.in_lane(RENDER).requests_size),
        ("ZCARD", k.in_lane(RENDER).leases),
    ]
    assert work_of([0, None, 0, 0, 0, None, 0]) == Work(0, 0, 0, 0, 0)  # never set
    assert work_of([1, b"7", 2, 3, 4, b"2", 1]) == Work(1, 9, 3, 3, 4)


def test_counters_keep_only_the_metric_fields() -> None:
    fields = {
        b"pages": b"10",
        b"items": b"4",
        b"errors:dead_letter": b"1",
        b"responses:200": b"9",
        b"_state": b"running",
        b"log_count/INFO": b"40",
        b"errors:broken": b"x",
    }
    assert counters_of(fields) == {
        "pages": 10,
        "items": 4,
        "errors:dead_letter": 1,
        "responses:200": 9,
    }


def test_a_cluster_read_from_raw_replies() -> None:
    """``send`` may hand back raw replies (flat lists) or redis-py's parsed ones."""
    sent: list[str] = []

    def send(name: str, commands: list[tuple[object, ...]]) -> list[object]:
        sent.append(name)
        if name == "read_cluster":
            assert commands[0] == ("TIME",) and commands[1] == ("INFO", "memory")
            return [
                [b"1000", b"500000"],
                b"# Memory\r\nused_memory:2048\r\nmaxmemory:0\r\n",
                *(1, b"5", 2, 0, 0),  # work
                3,  # dead
                4,  # unserializable
                *(1, 0, 0, 0),  # rejected lists
                40,  # the previous release's dupefilter set
                [b"pages", b"7"],  # totals, as a flat HGETALL
                {b"items_written": b"6"},  # db_writer, as redis-py parses it
                None,
                None,
                [b"h:1", b"999.5", b"h:2", b"1.0"],  # h:2 is older than the retention
                [b"http://p:1", b"1000600"],  # proxies:banned (ms): banned until 1000.6
                b"2",  # the seen-set's count
                0,  # the samples (EXISTS)
                b"3",  # the render queue's size
                1,  # its leases
            ]
        assert commands == [("HGETALL", "s:worker:h:1"), ("EXISTS", "s:worker:h:1:heartbeat")]
        return [{b"pages": b"7", b"items": b"2"}, 1]

    view = read_cluster(send, ["s"], worker_retention=900)
    assert sent == ["read_cluster", "read_cluster workers"]
    assert view.time == 1000.5 and view.used_memory == 2048 and view.maxmemory == 0
    [spider] = view.spiders
    assert spider.work == Work(1, 8, 3, 0, 0) and not spider.work.idle
    assert spider.queues["requests"] == 8 and spider.queues["render"] == 3
    assert spider.queues["dead"] == 3 and spider.queues["rejected"] == 1
    assert spider.queues["unserializable"] == 4
    assert spider.rejected == {"start_urls": 1, "requests": 0, "items": 0, "dead": 0}
    assert spider.dupefilter == 42 and spider.totals == {"pages": 7}
    assert spider.db_writer == {"items_written": 6.0} and spider.lag == 0.0
    [worker] = spider.workers
    assert (worker.worker, worker.alive, worker.counters) == ("h:1", True, {"pages": 7, "items": 2})
    assert as_dict(view)["spiders"][0]["idle"] is False
    assert spider.proxy_bans == {"http://p:1": 1000.6}
    assert spider.proxies(1000.5) == {"http://p:1": True}
    assert spider.proxies(1000.7) == {"http://p:1": False}


def test_a_spider_named_twice_is_read_once() -> None:
    def send(name: str, commands: list[tuple[object, ...]]) -> list[object]:
        per_spider = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, {}, {}, None, None, [], [], None, 0]
        per_spider += [None, 0]  # the render queue
        return [[b"1000", b"0"], {}, *per_spider]

    view = read_cluster(send, ["s", "s"], worker_retention=900)
    assert [spider.spider for spider in view.spiders] == ["s"]
    assert view.spiders[0].work.drained
