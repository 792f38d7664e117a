"""Reading the archive back: where each URL's captures are (``scrapy warc index``).

A capture is a ``response`` or ``revisit`` record; its place is the file and
the offset of its gzip member, which is what a replay tool's CDX index holds
too, so ``dd``/``warcio extract`` or any WARC reader can seek straight to it.
The files are read with warcio's ``ArchiveIterator`` (offsets included), an
open file's too: up to its last complete record.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from warcio.archiveiterator import ArchiveIterator
from warcio.exceptions import ArchiveLoadFailed

from spiders_project.archive.naming import OPEN_SUFFIX, SUFFIX

CAPTURE_TYPES = ("response", "revisit")


@dataclass(frozen=True)
class Capture:
    url: str
    date: str  # WARC-Date
    record_type: str  # response or revisit
    status: int | None
    path: Path
    offset: int  # of the record's gzip member in ``path``
    length: int  # of that member


def warc_files(directory: Path) -> list[Path]:
    """The WARC files of ``directory``, closed and open, oldest name first."""
    found = [*directory.glob(f"*{SUFFIX}"), *directory.glob(f"*{SUFFIX}{OPEN_SUFFIX}")]
    return sorted(found, key=lambda p: p.name)


def captures(paths: Iterable[Path], url: str | None = None) -> Iterator[Capture]:
    """Every capture in ``paths`` (of ``url`` only, when given), in file order."""
    for path in paths:
        with path.open("rb") as f:
            records = ArchiveIterator(f)
            try:
                for record in records:
                    if record.rec_type not in CAPTURE_TYPES:
                        continue
                    target = record.rec_headers.get_header("WARC-Target-URI")
                    if url is not None and target != url:
                        continue
                    status = record.http_headers.get_statuscode() if record.http_headers else None
                    date = record.rec_headers.get_header("WARC-Date")
                    records.read_to_end(record)
                    yield Capture(
                        str(target),
                        str(date),
                        str(record.rec_type),
                        int(status) if status else None,
                        path,
                        int(records.get_record_offset()),
                        int(records.get_record_length()),
                    )
            except (ArchiveLoadFailed, EOFError, OSError):
                continue  # an open file's partial last record: what came before stands


def latest(paths: Iterable[Path], url: str) -> Capture | None:
    """``url``'s latest capture (by WARC-Date, then file order), or None."""
    best: Capture | None = None
    for capture in captures(paths, url):
        if best is None or capture.date >= best.date:
            best = capture
    return best
