"""Key names of the db_writers' state beside an item buffer, beside ``keys/__init__.py``.
Stdlib only, like it: the db_writer, the read model and the ACL check build them here.

Any number of db_writers drain a buffer at once (``db_writer/item_queue.py``). What
each keeps is named from the buffer's keys, so it shares the buffer's slot and each
script touches one slot. A writer's id is unique to its process run.
"""

from __future__ import annotations

from spiders_project.keys import RedisKeys


def item_buffers(keys: RedisKeys) -> list[RedisKeys]:
    """The keys of each item buffer of the spider: its one ``items`` list today."""
    return [keys]


def processing_of(buffer: RedisKeys, writer: str) -> str:
    """List of the entries ``writer`` took from the buffer and has not committed yet:
    one per writer, so each acknowledges its batch by position."""
    return buffer.prefix + f"items:processing:{writer}"


def writers(buffer: RedisKeys) -> str:
    """Hash of the buffer's db_writers: writer id -> entries in its processing list,
    set by every script that changes that list."""
    return buffer.prefix + "db_writer:writers"


def lease(buffer: RedisKeys, writer: str) -> str:
    """Exists while ``writer`` lives: set again, with a TTL of DB_WRITER_LOCK_TTL, at each
    of its heartbeats and batches; once it is gone, another writer takes over its batch."""
    return buffer.prefix + f"db_writer:lease:{writer}"


def filling(buffer: RedisKeys) -> str:
    """The id of the writer filling a batch from the buffer, for at most its
    DB_WRITER_MAX_WAIT: the other writers leave the trickle to it."""
    return buffer.prefix + "db_writer:filling"
