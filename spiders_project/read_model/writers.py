"""What the item buffers and the db_writers hold, as Redis says it: the entries each
writer has in hand, what they set aside and wrote, and the age of the oldest item not
yet in the database.

Each db_writer has its own processing list (``keys/db_writers.py``), and the writers'
hash says how many entries each holds (its scripts keep the counts exact), so a reader
counts them all with one HGETALL and reads the heads of the lists that hold some. A
spider has one item buffer, and one more per frontier shard on a sharded frontier
(``keys/db_writers.item_buffers``), each with its own writers' hash, rejected list and
stats: a reader sums them. Standard library only, like the rest of the read model.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from spiders_project.keys import RedisKeys
from spiders_project.keys.item_entries import RAW_MARK, split_raw
from spiders_project.read_model.replies import hash_fields, numbers, text

# Replies of buffer_reads per buffer: its rejected entries, its writers' stats, its head.
PER_BUFFER = 3


@dataclass(frozen=True)
class BuffersView:
    """What every item buffer of a spider holds beside what the idle rule counts."""

    rejected: int  # entries the db_writers set aside (every buffer's items:rejected)
    stats: dict[str, float]  # the db_writers' stats of every buffer (writer_stats)
    heads: list[Any]  # each buffer's first entry (None: empty)
    holding: list[tuple[RedisKeys, str]]  # (buffer, writer id) of each batch in hand


def buffer_reads(buffers: Sequence[RedisKeys]) -> list[tuple[Any, ...]]:
    """The reads :func:`read_buffers` takes of each of ``buffers``, PER_BUFFER each."""
    reads: list[tuple[Any, ...]] = []
    for buffer in buffers:
        reads += [
            ("LLEN", buffer.items_rejected),
            ("HGETALL", buffer.db_writer_stats),
            ("LINDEX", buffer.items, 0),
        ]
    return reads


def read_buffers(
    buffers: Sequence[RedisKeys], writers: Sequence[Any], replies: Sequence[Any]
) -> BuffersView:
    """The item ``buffers`` from the HGETALL of each one's writers' hash and the
    replies to :func:`buffer_reads` of them, in their order."""
    return BuffersView(
        rejected=sum(int(n or 0) for n in replies[::PER_BUFFER]),
        stats=writer_stats(replies[1::PER_BUFFER]),
        heads=list(replies[2::PER_BUFFER]),
        holding=[
            (buffer, writer)
            for buffer, reply in zip(buffers, writers, strict=True)
            for writer in holding(reply)
        ],
    )


def writer_stats(replies: Sequence[Any]) -> dict[str, float]:
    """The db_writers' stats of every item buffer (HGETALL of each ``db_writer_stats``)
    as one: the counts summed, the last batch's time the latest."""
    total: dict[str, float] = {}
    for reply in replies:
        for name, value in numbers(hash_fields(reply or {})).items():
            if name == "last_batch_at":
                total[name] = max(total.get(name, value), value)
            else:
                total[name] = total.get(name, 0.0) + value
    return total


def held_by_writers(reply: Any) -> int:
    """The entries every db_writer holds in its processing list: the sum of the
    writers' hash (HGETALL of ``keys.db_writers.writers``)."""
    return sum(_count(value) for value in hash_fields(reply or {}).values())


def holding(reply: Any) -> list[str]:
    """The ids of the db_writers that hold entries, from the writers' hash."""
    return [text(writer) for writer, held in hash_fields(reply or {}).items() if _count(held)]


def item_lag(
    now: float, processing_heads: Sequence[Any], buffer_heads: Sequence[Any]
) -> float | None:
    """Age of the oldest item not yet in the database: the oldest of the heads of the
    db_writers' batches in hand (their processing lists) and of the item buffers
    (each buffer's writers take from its head, so its batches in hand are older
    than its head, but another buffer's head may be older still); 0 when there
    is none, None when one cannot be read."""
    heads = [head for head in (*processing_heads, *buffer_heads) if head is not None]
    if not heads:
        return 0.0
    try:
        return max(_age(now, head) for head in heads)
    except (ValueError, KeyError, TypeError):
        return None


def _age(now: float, head: Any) -> float:
    if head[:1] == RAW_MARK:  # the header-and-item format: its "at" is the row's scraped_at
        at = split_raw(head)[3]
        return max(0.0, now - datetime.fromisoformat(at).timestamp())
    entry = json.loads(head)
    # A worker's entry says when the item left its pipelines ("at"); an
    # entry of the previous release is the item, with its fetch time.
    at = entry["at"] if "at" in entry else entry["fetched_at"]
    return max(0.0, now - datetime.fromisoformat(at).timestamp())


def _count(value: Any) -> int:
    try:
        return int(value)
    except ValueError:
        return 0
