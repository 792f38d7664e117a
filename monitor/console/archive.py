"""The archive page: the latest captures of a URL, where WARC_ENABLED and WARC_DIR is
a folder on the monitor's node (``scrapy warc index`` reads the same files).

Reading WARC files is reading the disk, not Redis: a page reads only the
newest ``FILES_READ`` files (by name: ``<prefix>-<UTC timestamp>-...``, so the
newest last), newest first, and stops at ``CAPTURES_SHOWN`` captures. The one
console module besides ``actions.py`` that imports a feature package
(``archive``; tests/unit/test_layers.py). Blocking: run in a thread.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from spiders_project.archive.index import captures, warc_files

FILES_READ = 20
CAPTURES_SHOWN = 20


@dataclass(frozen=True)
class Found:
    """A capture as the page lists it (what ``scrapy warc index --json`` prints)."""

    url: str
    date: str
    record_type: str
    status: int | None
    file: str
    offset: int
    length: int


def latest_captures(directory: Path, url: str) -> tuple[list[Found], int, int]:
    """``url``'s newest captures among the newest files: (captures newest first,
    files read, files there are)."""
    files = warc_files(directory)
    newest = list(reversed(files[-FILES_READ:]))
    found: list[Found] = []
    for path in newest:
        of_file = [
            Found(c.url, c.date, c.record_type, c.status, c.path.name, c.offset, c.length)
            for c in captures([path], url)
        ]
        found += sorted(of_file, key=lambda f: f.date, reverse=True)
        if len(found) >= CAPTURES_SHOWN:
            break
    found.sort(key=lambda f: f.date, reverse=True)
    return found[:CAPTURES_SHOWN], len(newest), len(files)
