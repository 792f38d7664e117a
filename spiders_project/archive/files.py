"""This worker's WARC files: one open at a time, closed at ``WARC_MAX_SIZE`` and at shutdown.

Used by the writer thread only (:mod:`.writer`). A file is created as
``<name>.open`` with ``O_EXCL`` (an existing name is never overwritten) and
an ``flock`` that says "a live worker writes this" (:mod:`.recovery`), starts
with a ``warcinfo`` record, and receives whole gzip members, each written
with one ``os.write`` loop straight to the file descriptor: nothing waits in
a user-space buffer, so a SIGKILL loses at most the member being written.
Closing fsyncs it, renames it without ``.open`` and fsyncs the directory.
"""

from __future__ import annotations

import datetime
import fcntl
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from spiders_project.archive.naming import OPEN_SUFFIX, file_name
from spiders_project.archive.records import RecordBuilder

logger = logging.getLogger(__name__)

Clock = Callable[[], datetime.datetime]


def utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


class WarcFiles:
    """Appends records to the current file, opening and closing files as needed.

    Every method may raise ``OSError`` (a full disk, a read-only directory);
    the caller decides what then (:mod:`.writer`). After a failed write the
    file is cut back to its last whole record and stays open, so the same
    records can be tried again (a disk that is full stays full for every file);
    when even the cut fails it is closed as it is. What is on disk stays a run
    of complete records.
    """

    def __init__(
        self,
        directory: Path,
        prefix: str,
        worker: str,
        max_size: int,
        info: Mapping[str, str],
        *,
        clock: Clock = utc_now,
    ) -> None:
        self.directory = directory
        self.prefix = prefix
        self.worker = worker
        self.max_size = max_size
        self.info = dict(info)
        self.clock = clock
        self.builder = RecordBuilder()
        self.serial = 0
        self.closed: list[Path] = []  # every file this process closed, oldest first
        self._fd: int | None = None
        self._path: Path | None = None
        self._size = 0
        self._unreported = (0, 0)  # a new file's warcinfo: (records, bytes) not yet reported

    @property
    def current(self) -> Path | None:
        """The ``.open`` file being written, if any."""
        return self._path

    def append(self, members: Sequence[bytes]) -> tuple[int, int]:
        """Write one fetch's records (kept together in one file); the records and
        bytes written, a new file's warcinfo included.

        Opens a file first if none is open, and closes it once it reaches
        ``max_size``.
        """
        if self._fd is None:
            self._unreported = (1, self._open())
        data = b"".join(members)
        self._write(data)
        # A warcinfo written before a failed write is reported with the retry's records.
        records, written = self._unreported
        self._unreported = (0, 0)
        if self._size >= self.max_size:
            self.close()
        return records + len(members), written + len(data)

    def close(self) -> Path | None:
        """Close the open file, if any, under its final name; returns that name."""
        if self._fd is None or self._path is None:
            return None
        fd, path = self._fd, self._path
        self._fd, self._path = None, None
        try:
            os.fsync(fd)
        finally:
            os.close(fd)  # releases the flock
        final = path.with_name(path.name[: -len(OPEN_SUFFIX)])
        os.replace(path, final)
        self._fsync_directory()
        self.closed.append(final)
        logger.info("Closed WARC file %s (%d bytes)", final.name, self._size)
        return final

    def abandon(self) -> None:
        """After a write error: close the file as it is, if it can be (a later
        start's recovery finishes a file this fails to rename)."""
        try:
            self.close()
        except OSError as exc:
            logger.warning("Could not close WARC file %s: %s", self._path, exc)
            if self._fd is not None:
                os.close(self._fd)
            self._fd, self._path = None, None

    def _open(self) -> int:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.serial += 1
        name = file_name(self.prefix, self.clock(), self.serial, self.worker)
        path = self.directory / (name + OPEN_SUFFIX)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        self._fd, self._path, self._size = fd, path, 0
        info = self.builder.warcinfo(name, self.info)
        try:
            self._write(info)
        except OSError:
            self._discard()
            raise
        logger.info("Opened WARC file %s", path.name)
        return len(info)

    def _discard(self) -> None:
        """Remove a file whose warcinfo could not be written (it holds nothing)."""
        fd, path = self._fd, self._path
        self._fd, self._path = None, None
        if fd is not None:
            os.close(fd)
        if path is not None:
            try:
                path.unlink()
            except OSError:
                pass  # a later start's recovery removes an empty .open file

    def _write(self, data: bytes) -> None:
        assert self._fd is not None
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self._fd, view) :]
        except OSError:
            self._cut_back()
            raise
        self._size += len(data)

    def _cut_back(self) -> None:
        """Drop a partly written member, so the file ends on a whole record."""
        assert self._fd is not None
        try:
            os.ftruncate(self._fd, self._size)
        except OSError:
            self.abandon()

    def _fsync_directory(self) -> None:
        fd = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
