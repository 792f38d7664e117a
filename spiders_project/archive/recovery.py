"""A ``.open`` file left by a worker that died: keep its complete records, then close it.

Every record is one gzip member, written whole and flushed before the next
(:mod:`.files`), so a killed worker's file is a run of complete members,
perhaps followed by part of one. :func:`complete_length` finds where the last
complete member ends; :func:`recover` cuts the rest and renames the file as
if it had been closed. A file is another live worker's while that worker
holds its ``flock`` (taken when the file was opened, released by the kernel
when the process dies, SIGKILL included), so a worker starting beside others
in the same ``WARC_DIR`` recovers only the files of dead ones.
"""

from __future__ import annotations

import fcntl
import logging
import os
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

from spiders_project.archive.naming import OPEN_SUFFIX, parse

logger = logging.getLogger(__name__)

_CHUNK = 1024 * 1024
# A writer creates its file, then locks it, then writes its warcinfo: an empty
# file younger than this (seconds) may be one between the first two steps.
FRESH = 60.0


def complete_length(path: Path) -> tuple[int, int]:
    """(bytes, records): where the last complete WARC record of ``path`` ends, and how many.

    A member counts when it inflates to its end (its gzip trailer checked by
    zlib) and holds a WARC record (``WARC/`` first).
    """
    good = records = 0
    offset = 0
    inflater = zlib.decompressobj(zlib.MAX_WBITS + 16)
    head = b""
    with path.open("rb") as f:
        pending = b""
        while True:
            if not pending:
                pending = f.read(_CHUNK)
                if not pending:
                    return good, records
            try:
                out = inflater.decompress(pending)
            except zlib.error:
                return good, records
            if len(head) < 5:
                head += out[: 5 - len(head)]
            consumed = len(pending) - len(inflater.unused_data)
            if inflater.eof:
                offset += consumed
                if not head.startswith(b"WARC/"):
                    return good, records
                good, records = offset, records + 1
                pending = inflater.unused_data
                inflater = zlib.decompressobj(zlib.MAX_WBITS + 16)
                head = b""
            else:
                offset += len(pending)
                pending = b""


@dataclass(frozen=True)
class Recovered:
    path: Path  # the closed name it has now
    records: int  # complete records kept
    cut: int  # bytes of a partial record removed


def recover(path: Path) -> Recovered:
    """Cut ``path`` (a ``.open`` file nobody writes) after its last complete
    record and rename it to its closed name."""
    good, records = complete_length(path)
    size = path.stat().st_size
    closed = path.with_name(path.name[: -len(OPEN_SUFFIX)])
    if not records:  # not even its warcinfo: nothing worth a file
        path.unlink()
        return Recovered(closed, 0, size)
    if good < size:
        os.truncate(path, good)
    os.replace(path, closed)
    return Recovered(closed, records, size - good)


def recover_dead(directory: Path, prefix: str) -> list[Recovered]:
    """Every ``.open`` file of ``prefix`` in ``directory`` whose writer is gone, recovered.

    One log line per file. A file another live worker holds (its ``flock``)
    is left alone; so is an empty one younger than ``FRESH`` (its writer may
    not have locked it yet: a later start removes it).
    """
    done = []
    for path in sorted(directory.glob(f"{prefix}-*{OPEN_SUFFIX}")):
        parsed = parse(path.name)
        if parsed is None or parsed.prefix != prefix:
            continue
        try:
            fd = os.open(path, os.O_RDWR)
        except FileNotFoundError:
            continue  # closed by its writer meanwhile
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # a live worker's
            if not path.exists():
                continue  # renamed by its writer between the glob and the lock
            status = os.fstat(fd)
            if not status.st_size and time.time() - status.st_mtime < FRESH:
                continue  # created this instant: its writer may not hold the lock yet
            found = recover(path)
        finally:
            os.close(fd)
        logger.warning(
            "Recovered WARC file %s left open by a stopped worker: %d complete records "
            "kept, %d bytes of a partial record cut",
            found.path.name,
            found.records,
            found.cut,
        )
        done.append(found)
    return done
