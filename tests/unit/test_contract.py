"""The contract between workers and their readers: pure reading, stdlib only."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from spiders_project.keys import RENDER, RedisKeys
from spiders_project.keys.db_writers import writers
from spiders_project.read_model.contract import (
    RUNNING,
    STATE_FIELD,
    Work,
    counters_of,
    work_of,
    work_reads,
)

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


def source(module: str) -> Path:
    """The file of a dotted module name: a module's .py, or a package's __init__.py."""
    path = ROOT / module.replace(".", "/")
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


# The contract's modules: what workers publish, the cluster's snapshot, replies,
# and the operator's host steering records.
CONTRACT = (
    "spiders_project.read_model.contract",
    "spiders_project.read_model.cluster_view",
    "spiders_project.read_model.replies",
    "spiders_project.read_model.host_steering",
    "spiders_project.read_model.job_progress",
    "spiders_project.read_model.writers",
    "spiders_project.keys.jobs",
    "spiders_project.keys.cookies",
    "spiders_project.keys.db_writers",
    "spiders_project.keys.item_entries",
)


def test_the_contract_imports_only_the_standard_library_and_keys() -> None:
    allowed = {*CONTRACT, "spiders_project.keys"}
    for module in CONTRACT:
        for name in imports_of(source(module)):
            assert name.split(".")[0] in sys.stdlib_module_names or name in allowed, (module, name)
    for name in imports_of(source("spiders_project.keys")):
        assert name.split(".")[0] in sys.stdlib_module_names, name


def test_spiders_project_never_imports_the_monitor() -> None:
    for path in (ROOT / "spiders_project").rglob("*.py"):
        found = {n for n in imports_of(path) if n == "monitor" or n.startswith("monitor.")}
        assert not found, (path, found)


def test_the_monitor_reads_workers_through_the_contract_not_their_extensions() -> None:
    # The console's actions act, through the code the commands call (the dead
    # letters' requeue takes the frontier's value codec): test_layers' door.
    acting = ROOT / "monitor" / "console" / "actions.py"
    for path in set((ROOT / "monitor").rglob("*.py")) - {acting}:
        worker_side = {
            n
            for n in imports_of(path)
            if n.startswith(("spiders_project.worker", "spiders_project.frontier"))
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
        ("HGETALL", writers(k)),
        ("GET", k.in_lane(RENDER).requests_size),
        ("ZCARD", k.in_lane(RENDER).leases),
    ]
    assert work_of([0, None, 0, 0, {}, None, 0], k) == Work(0, 0, 0, 0, 0)  # never set
    # The writers' hash: each db_writer's entries in hand, summed (a dict from
    # redis-py, a flat list from a raw reply).
    held = {b"w1": b"3", b"w2": b"1", b"w3": b"0"}
    assert work_of([1, b"7", 2, 3, held, b"2", 1], k) == Work(1, 9, 3, 3, 4)
    assert work_of([1, b"7", 2, 3, [b"w1", b"4"], b"2", 1], k) == Work(1, 9, 3, 3, 4)
    # A count that drifted below zero in one queue hides nothing queued in another.
    assert work_of([0, b"1", 0, 0, {}, b"-1", 0], k) == Work(0, 1, 0, 0, 0)


def test_counters_keep_only_the_metric_fields() -> None:
    fields = {
        b"pages": b"10",
        b"items": b"4",
        b"errors:dead_letter": b"1",
        b"responses:200": b"9",
        STATE_FIELD.encode(): RUNNING.encode(),
        b"log_count/INFO": b"40",
        b"errors:broken": b"x",
    }
    assert counters_of(fields) == {
        "pages": 10,
        "items": 4,
        "errors:dead_letter": 1,
        "responses:200": 9,
    }


SHARDED = RedisKeys("distributed", cluster=True, shards=3)


def test_work_sums_the_shards_lanes_and_item_buffers() -> None:
    reads = work_reads(SHARDED)
    # The first shard's HTTP queue, the two other shards', three render queues,
    # then the item buffers of the three shards (the spider's own among the five).
    assert len(reads) == 5 + 2 * 2 + 3 * 2 + 3 * 2
    assert reads[3:5] == [("LLEN", SHARDED.items), ("HGETALL", writers(SHARDED))]
    assert reads[9:15] == [
        cmd
        for shard in SHARDED.all_shards
        for cmd in (
            ("GET", shard.in_lane(RENDER).requests_size),
            ("ZCARD", shard.in_lane(RENDER).leases),
        )
    ]
    assert reads[15:] == [
        cmd
        for shard in SHARDED.all_shards
        for cmd in (("LLEN", shard.items), ("HGETALL", writers(shard)))
    ]
    held = {b"w": b"5"}
    queues = [b"10", 20, None, 30, b"1", 1, None, 0, b"4", 2]
    buffers = [7, {b"v": b"2"}, None, None, b"-3", {}]
    replies = [1, b"2", 3, 4, held, *queues, *buffers]
    assert work_of(replies, SHARDED) == Work(1, 17, 56, 11, 7)
    # Nothing buffered anywhere but on one shard: the crawl is not drained.
    only_shard = [0, 0, 0, 0, {}, *[0] * 10, 0, {}, 1, {}, 0, {}]
    assert work_of(only_shard, SHARDED).idle and not work_of(only_shard, SHARDED).drained
