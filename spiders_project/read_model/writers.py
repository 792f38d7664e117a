"""What the db_writers hold, as Redis says it: the entries each has in hand, and the age
of the oldest item not yet in the database.

Each db_writer has its own processing list (``keys/db_writers.py``), and the writers'
hash says how many entries each holds (its scripts keep the counts exact), so a reader
counts them all with one HGETALL and reads the heads of the lists that hold some. Standard
library only, like the rest of the read model.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from spiders_project.read_model.replies import hash_fields, text


def held_by_writers(reply: Any) -> int:
    """The entries every db_writer holds in its processing list: the sum of the
    writers' hash (HGETALL of ``keys.db_writers.writers``)."""
    return sum(_count(value) for value in hash_fields(reply or {}).values())


def holding(reply: Any) -> list[str]:
    """The ids of the db_writers that hold entries, from the writers' hash."""
    return [text(writer) for writer, held in hash_fields(reply or {}).items() if _count(held)]


def item_lag(now: float, processing_heads: Sequence[Any], buffer_head: Any) -> float | None:
    """Age of the oldest item not yet in the database: the oldest of the db_writers'
    batches in hand (the heads of their processing lists), else the buffer's head;
    0 when there is none, None when one cannot be read."""
    heads = [head for head in processing_heads if head is not None]
    if not heads:
        heads = [buffer_head] if buffer_head is not None else []
    if not heads:
        return 0.0
    try:
        return max(_age(now, head) for head in heads)
    except (ValueError, KeyError, TypeError):
        return None


def _age(now: float, head: Any) -> float:
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
