"""WARC file names: ``<prefix>-<UTC timestamp>-<serial>-<worker>.warc.gz``.

Unique across workers and restarts: the worker part is ``host-pid`` (two
workers of a node differ in pid, of two nodes in host), the timestamp has
milliseconds and the serial counts the files one process opened, so a
restarted worker that got its old pid back still names its files after a
later time. ``files.WarcFiles`` also opens each with ``O_EXCL``: a name that
exists already is never overwritten. Stdlib only.
"""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass

SUFFIX = ".warc.gz"
#: A file being written carries this after SUFFIX until it is closed.
OPEN_SUFFIX = ".open"

_NAME = re.compile(
    r"^(?P<prefix>.+)-(?P<stamp>\d{17})-(?P<serial>\d{5,})-(?P<worker>[^/]+)"
    + re.escape(SUFFIX)
    + r"$"
)


def worker_part(worker: str) -> str:
    """A worker id (``host:pid``) as a file name part: ``host-pid``, no ``:`` or ``/``."""
    return re.sub(r"[^A-Za-z0-9._-]", "-", worker)


def timestamp(when: datetime.datetime) -> str:
    """``YYYYmmddHHMMSSfff`` in UTC: 17 digits, sorting as time does."""
    utc = when.astimezone(datetime.UTC)
    return utc.strftime("%Y%m%d%H%M%S") + f"{utc.microsecond // 1000:03d}"


def file_name(prefix: str, when: datetime.datetime, serial: int, worker: str) -> str:
    """The closed name of a file (the open one adds ``OPEN_SUFFIX``)."""
    return f"{prefix}-{timestamp(when)}-{serial:05d}-{worker_part(worker)}{SUFFIX}"


@dataclass(frozen=True)
class FileName:
    prefix: str
    stamp: str
    serial: int
    worker: str


def parse(name: str) -> FileName | None:
    """The parts of a closed or open file name, or None for any other file."""
    if name.endswith(OPEN_SUFFIX):
        name = name[: -len(OPEN_SUFFIX)]
    match = _NAME.match(name)
    if match is None:
        return None
    return FileName(match["prefix"], match["stamp"], int(match["serial"]), match["worker"])
