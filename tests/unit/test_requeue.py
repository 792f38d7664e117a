"""Putting dead letters back (dead_letters/requeue.py): a fresh start for each request, and
one way to read and sort a batch for one Redis and a sharded frontier alike. Requeues
against Redis: tests/integration/test_dead_letters.py."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from spiders_project.crawl.hosts import host_of
from spiders_project.dead_letters.letters import make_dead_letter
from spiders_project.dead_letters.requeue import _Batch, requeued_request
from spiders_project.frontier.calls import MAX_PRIORITY
from spiders_project.frontier.codec import serialize
from spiders_project.keys import HTTP, RENDER, RedisKeys

K = RedisKeys("distributed")
SHARDED = RedisKeys("distributed", cluster=True, shards=3)


def letter(url: str, meta: dict[str, Any] | None = None, priority: int = 0) -> bytes:
    payload = serialize.dumps({"url": url, "meta": meta or {}, "priority": priority})
    when = datetime.now(UTC)
    return make_dead_letter(
        payload, error="HTTP 503", attempts=3, failed_at=when, worker="h:1"
    ).dumps()


def request(raw: bytes) -> dict[str, Any]:
    return json.loads(raw)["request"]


def sort(raw: list[bytes], keys: RedisKeys = K) -> _Batch:
    def lane_of(url: str, meta: Any) -> str:
        return RENDER if meta.get("render") else HTTP

    return _Batch.sort(raw, keys, -1, serialize.PLAIN, host_of, lane_of)


def test_a_requeued_request_gets_its_retries_and_priority_back() -> None:
    raw = letter("http://a.test/1", {"retry_times": 2, "x": 1}, priority=-2)
    priority, payload, meta = requeued_request(request(raw), -1)
    assert priority == 0 and meta == {"x": 1}
    assert serialize.loads(payload)["priority"] == 0
    # The request's own adjustment wins over the setting's.
    raw = letter("http://a.test/1", {"retry_times": 2, "priority_adjust": -3}, priority=-6)
    assert requeued_request(request(raw), -1)[0] == 0
    raw = letter("http://a.test/1", {"retry_times": 3}, priority=MAX_PRIORITY - 1)
    assert requeued_request(request(raw), -1)[0] == MAX_PRIORITY


def test_a_batch_goes_oldest_first_each_entry_once_garbage_aside() -> None:
    first, second = letter("http://a.test/1"), letter("http://a.test/2")
    # LRANGE's order: newest first; the same failure written twice.
    batch = sort([second, b"\xff", second, first])
    assert [entry[0] for entry in batch.queues[K]] == ["a.test", "a.test"]
    payloads = [serialize.loads(entry[3])["url"] for entry in batch.queues[K]]
    assert payloads == ["http://a.test/1", "http://a.test/2"]
    assert all(entry[1] == "" for entry in batch.queues[K]), "never filtered again"
    assert [raw for raw, _ in batch.rejected] == [b"\xff"] and batch.requests == 2


def test_each_request_goes_to_its_hosts_shard_in_its_lane() -> None:
    raws = [letter(f"http://h{n}.test/", {"render": n % 2 == 1}) for n in range(6)]
    batch = sort(raws[::-1], SHARDED)
    queue_of = {entry[0]: queue for queue, entries in batch.queues.items() for entry in entries}
    assert queue_of == {
        f"h{n}.test": SHARDED.for_host(f"h{n}.test").in_lane(RENDER if n % 2 else HTTP)
        for n in range(6)
    }
    assert len({queue.shard for queue in batch.queues}) > 1, "hosts spread over the shards"
    assert batch.requests == 6 and not batch.rejected


class RecordingPipe:
    def __init__(self) -> None:
        self.commands: list[tuple[Any, ...]] = []

    def lrem(self, *args: Any) -> None:
        self.commands.append(("LREM", *args))

    def lpush(self, *args: Any) -> None:
        self.commands.append(("LPUSH", *args))


def test_a_batch_removes_every_entry_read_from_the_tail_and_sets_garbage_aside() -> None:
    one = letter("http://a.test/1")
    batch = sort([one, b"[1]", one])
    pipe = RecordingPipe()
    batch.remove(pipe, K)  # type: ignore[arg-type]
    assert pipe.commands == [
        ("LREM", K.dead, -2, one),
        ("LREM", K.dead, -1, b"[1]"),
        ("LPUSH", K.dead_rejected, b"[1]"),
    ]
